"""`pipeline memories export`: a section between two markers, the rest of the file byte for byte, the same
bytes from the same corpus, under --max-bytes, and every claim shown as exactly its characters."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from pipeline.cli.main import main
from pipeline.console import shown
from pipeline.corpus import memory_file, review
from pipeline.corpus.git_corpus import Corpus
from pipeline.delivery import agent_files
from pipeline.delivery.memory_reads import Memory, memories_at_head
from pipeline.errors import UsageError
from pipeline.secrets.redact import redacted
from tests.strategies import HOSTILE, value


def memory(claim: str, *, kind: str = "procedural", kept: str | None = "2026-12-01T10:00:00Z", n: int = 0) -> Memory:
    mid = memory_file.memory_id(kind, f"{claim} {n}")
    doc = memory_file.MemoryDoc(id=mid, kind=kind, claim=claim, entities=[], sessions=["s1"], created="2026-11-30",
                                run="r", batch="b", status="kept" if kept else "new", kept=kept)
    return Memory(f"{kind}/{mid}.md", doc)


def section(mems: list[Memory], max_bytes: int = 8192, include_new: bool = False) -> agent_files.Export:
    return agent_files.build(agent_files.select(mems, include_new=include_new), fmt="agents-md", project=None,
                             include_new=include_new, max_bytes=max_bytes)


OWN = "# Our agents\r\n\r\nRun `make test` first.\r\n<!-- a comment of ours -->\r\nno newline at the end"


@pytest.mark.parametrize("own", [OWN, "", "x\n", "# only a heading\n\n"])
def test_the_rest_of_the_file_is_kept_byte_for_byte_and_a_second_export_changes_nothing(own: str) -> None:
    s1 = section([memory("Run `pytest` with PGPORT=5433 set.")]).section
    first = agent_files.splice(own, s1, Path("AGENTS.md"))
    assert first.startswith(own) and first.endswith(agent_files.END + "\n")
    assert agent_files.splice(first, s1, Path("AGENTS.md")) == first
    # a new section replaces the old one in place; removing the section gives the file back
    s2 = section([memory("Another claim.", n=2), memory("Run `pytest` with PGPORT=5433 set.")]).section
    second = agent_files.splice(first + "\ntext after\n", s2, Path("AGENTS.md"))
    assert second == first.replace(s1, s2) + "\ntext after\n"


def test_broken_markers_are_refused_with_their_lines() -> None:
    s = section([memory("A claim.")]).section
    for broken in (f"a\n{agent_files.BEGIN}\nb\n", f"{agent_files.END}\n{agent_files.BEGIN}\n", s + s):
        with pytest.raises(UsageError, match=r"AGENTS.md: expected one begin marker.*line \d"):
            agent_files.splice(broken, s, Path("AGENTS.md"))
    # a marker quoted inside a line is text, not a marker
    quoted = f"see `{agent_files.BEGIN}` for the format\n"
    assert agent_files.splice(quoted, s, Path("AGENTS.md")).startswith(quoted)


def test_over_max_bytes_the_least_recently_kept_drop_out_and_the_section_says_how_many() -> None:
    mems = [memory(f"Claim number {i} about the build.", kept=f"2026-12-{i + 1:02d}T00:00:00Z", n=i) for i in range(20)]
    full = section(mems)
    assert full.shown == 20 and full.left_out == 0
    cut = section(mems, max_bytes=1200)
    assert len(cut.section.encode()) <= 1200 and 0 < cut.shown < 20
    assert f"{cut.left_out} more memories left out" in cut.section and cut.left_out == 20 - cut.shown
    kept_days = sorted(int(line.split("number ")[1].split(" ")[0]) for line in cut.section.splitlines()
                       if line.startswith("- "))
    assert kept_days == list(range(20 - cut.shown, 20))  # the most recently kept stayed
    with pytest.raises(UsageError, match="cannot hold even the section"):
        section(mems, max_bytes=50)


def test_new_memories_only_with_include_new_and_marked() -> None:
    mems = [memory("Kept one."), memory("Not reviewed.", kept=None, n=1)]
    assert "Not reviewed" not in section(mems).section
    both = section(mems, include_new=True).section
    assert "Not reviewed. (new, not yet reviewed)" in both and "Kept one." in both


def _text_of(markdown: str) -> list[str]:
    """The text each list item renders to (CommonMark), without its trailing id."""
    tokens = MarkdownIt("commonmark").parse(markdown)
    out = []
    for t in tokens:
        if t.type == "inline" and t.children and t.map and markdown.splitlines()[t.map[0]].startswith("- "):
            rendered = "".join(c.content for c in t.children if c.type in ("text", "code_inline", "softbreak"))
            out.append(rendered)
    return out


@settings(max_examples=150, deadline=None)
@given(st.lists(value.filter(lambda v: v.strip()), min_size=1, max_size=4))
def test_every_claim_renders_as_exactly_its_characters(claims: list[str]) -> None:
    mems = [memory(memory_file.one_line(c) or "x", n=i) for i, c in enumerate(claims)]
    text = section(mems).section
    assert text.count(agent_files.BEGIN) == 1 and text.count(agent_files.END) == 1
    got_items = sorted(_text_of(text))
    expected = sorted(f"{shown(redacted(m.doc.claim))} {m.doc.id}".replace("\n", " ") for m in mems)
    assert len(got_items) == len(expected)
    for got, want in zip(got_items, expected, strict=True):
        assert got.split() == want.split()  # CommonMark trims and folds the item's edge whitespace only


def test_hostile_pieces_never_become_markup() -> None:
    mems = [memory(h + " tail", n=i) for i, h in enumerate(HOSTILE) if h.strip() and memory_file.one_line(h).strip()]
    html = MarkdownIt("commonmark").render(section(mems).section)
    for tag in ("<b>", "<script>", "<em>", "<strong>", "<code>c"):
        assert tag not in html


@pytest.fixture
def night_copy(samples_night, tmp_path: Path) -> tuple[Path, Path]:
    src = Path(samples_night["dir"])
    shutil.copy(src / "w.duckdb", tmp_path / "w.duckdb")
    shutil.copytree(src / "corpus", tmp_path / "corpus")
    return tmp_path / "w.duckdb", tmp_path / "corpus"


def test_the_cli_writes_only_the_file_named_and_keeps_it_idempotent(night_copy, tmp_path: Path, capsys) -> None:
    wh, corpus = night_copy
    mid = memories_at_head(Corpus(corpus))[0].doc.id
    review.keep_memory(mid, db=wh, corpus=corpus)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["memories", "export", "--format", "agents-md", "--db", str(wh), "--corpus", str(corpus)]) == 0
    printed = capsys.readouterr().out
    assert mid in printed and sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written
    target = tmp_path / "AGENTS.md"
    target.write_bytes(OWN.encode())
    args = ["memories", "export", "--format", "agents-md", "--out", str(target), "--db", str(wh), "--corpus", str(corpus)]
    assert main(args) == 0
    once = target.read_bytes()
    assert once.startswith(OWN.encode()) and once.decode().endswith(printed)
    assert main(args) == 0 and target.read_bytes() == once
    assert "unchanged:" in capsys.readouterr().err
    # claude-md: a file to import, and the hint says how
    assert main(["memories", "export", "--format", "claude-md", "--out", str(tmp_path / "mem.md"), "--db", str(wh),
                 "--corpus", str(corpus)]) == 0
    assert "@" in capsys.readouterr().err and (tmp_path / "mem.md").read_text().startswith(agent_files.BEGIN)
    # --project keeps only memories with a session there
    assert main(["memories", "export", "--format", "agents-md", "--project", "no-such-project", "--db", str(wh),
                 "--corpus", str(corpus)]) == 0
    assert mid not in capsys.readouterr().out
    assert main(["memories", "export", "--db", str(wh), "--corpus", str(corpus)]) == 2
    assert "--format agents-md" in capsys.readouterr().err
