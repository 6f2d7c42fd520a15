"""The command reference of the documentation site, written from the parsers themselves.

`python -m pipeline.cli.reference` (or `make docs-cli`) rewrites `docs/cli/`: an index, one page for
every verb that `pipeline --help` lists, and one for every sub-verb (`memories keep`, `tasks done`: the
choices of a verb's `action` argument), plus the command-reference part of the `nav` in `mkdocs.yml`
(between its two marker comments). Each page shows the verb's real `--help`, formatted at a fixed
width of 80 columns so that it reads the same on every machine. `--check` writes nothing and exits 1
naming every page that differs; `tests/cli/test_reference.py` makes the same comparison, so a
changed flag without a regenerated page fails `make test`.

Edit the help in `pipeline/cli/*.py`, never the pages. A verb also needs a line in `GUIDES` below:
the section of a guide that explains it (the strict site build checks that the link resolves).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import sys
import unicodedata
from collections.abc import Iterator
from pathlib import Path

from pipeline.cli.main import build_parser

WIDTH = 80
ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
CLI_DIR = "cli"
MKDOCS = ROOT / "mkdocs.yml"
NAV_BEGIN = "# begin command reference (written by python -m pipeline.cli.reference)"
NAV_END = "# end command reference"
HEADER = ("<!-- Written by `python -m pipeline.cli.reference` from the parsers: edit the help in pipeline/cli/, "
          "then run `make docs-cli`. -->")

# Where each verb is explained in the guides (a page of docs/, and the heading's anchor).
GUIDES: dict[str, str] = {
    "ingest": "exploring.md#ingest-transcripts",
    "sessions": "exploring.md#list-sessions",
    "read": "exploring.md#read-the-stored-lines",
    "check-real": "exploring.md#check-a-folder-of-real-transcripts",
    "sql": "exploring.md#sql",
    "search": "exploring.md#search",
    "show": "exploring.md#show-a-session",
    "consolidate": "nightly.md#one-batch-by-hand",
    "check-answer": "nightly.md#the-answer-contract",
    "apply": "nightly.md#one-batch-by-hand",
    "memories": "agents.md#review-new-kept-dropped",
    "tasks": "nightly.md#tasks",
    "mcp": "agents.md#asked-for-while-working-pipeline-mcp",
    "nightly": "nightly.md",
    "eval": "eval.md",
    "import-calls": "cache.md#llm-call-logs-from-elsewhere",
    "simulate": "cache.md#a-workload-with-a-known-answer",
    "cache-report": "cache.md",
    "cache-eval": "cache.md#checked-against-readers",
    "export": "scale.md#the-parquet-lake",
    "html": "nightly.md#notebooks-as-offline-pages",
    "usage": "exploring.md#usage-and-cost",
}
SUB_GUIDES: dict[str, str] = {
    "memories keep": "agents.md#review-new-kept-dropped",
    "memories drop": "agents.md#review-new-kept-dropped",
    "memories export": "agents.md#loaded-at-session-start-pipeline-memories-export",
    "tasks confirm": "nightly.md#tasks",
    "tasks reject": "nightly.md#tasks",
    "tasks done": "nightly.md#tasks",
}


@contextlib.contextmanager
def _fixed_width() -> Iterator[None]:
    """argparse wraps help to the terminal's width, read from COLUMNS when it is set."""
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(WIDTH)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = before


def help_text(argv: list[str]) -> str:
    """What `pipeline ARGV --help` prints, at the fixed width."""
    out = io.StringIO()
    with _fixed_width(), contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        build_parser(argv).parse_args([*argv, "--help"])
    return out.getvalue()


def _verbs_action(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def verbs() -> list[tuple[str, str]]:
    """(verb, one-line summary) in the order `pipeline --help` lists them."""
    sub = _verbs_action(build_parser())
    return [(a.dest, a.help or "") for a in sub._choices_actions]


def sub_verbs(verb: str) -> list[str]:
    """The sub-verbs of a verb: the choices of its `action` argument other than the default (list)."""
    parser = _verbs_action(build_parser([verb])).choices[verb]
    for a in parser._actions:
        if not a.option_strings and a.dest == "action" and a.choices:
            return [c for c in a.choices if c != a.default]
    return []


def usage_line(argv: list[str]) -> str:
    """The usage line of a verb, as one line (argparse wraps it)."""
    return " ".join(help_text(argv).split("\n\n", 1)[0].split())


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~&])")


def plain(text: str) -> str:
    """Help text shown as the words it is: every character Markdown or HTML would read is escaped."""
    return _MD_SPECIAL.sub(r"\\\1", text)


def inline(text: str) -> str:
    """Help text for a page: what it writes in backticks (a command, a field) as code, the rest plain."""
    parts = re.split(r"`([^`\n]+)`", text)
    return "".join(f"`{part}`" if i % 2 else plain(part) for i, part in enumerate(parts))


def _slug(heading: str) -> str:
    """The anchor MkDocs' toc extension gives a heading (its default slugify)."""
    text = unicodedata.normalize("NFKD", heading.replace("`", "")).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower())


def _guide_link(target: str) -> str:
    """A Markdown link to a guide section, named by the page's title and the section's heading."""
    page, _, anchor = target.partition("#")
    text = (DOCS / page).read_text(encoding="utf-8") if (DOCS / page).is_file() else ""
    headings = re.findall(r"^(#{1,6}) (.+?)\s*$", text, re.M)
    title = next((h for level, h in headings if level == "#"), page)
    section = next((h for _, h in headings if _slug(h) == anchor), None) if anchor else None
    name = f"{title} › {section}" if section else title
    return f"[{plain(name.replace('`', ''))}](../{target})"


def _block(text: str) -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}text\n{text.rstrip()}\n{fence}\n"


def _sentences_naming(description: str, word: str) -> str:
    """The sentences of a verb's description that name one of its sub-verbs (as `keep` or `pipeline memories keep`)."""
    sentences = re.split(r"(?<=[.)])\s+(?=[`A-Z])", " ".join(description.split()))
    return " ".join(s for s in sentences if re.search(rf"`(pipeline \S+ )?{re.escape(word)}\b", s))


def page_name(verb: str, sub: str | None = None) -> str:
    return f"{CLI_DIR}/{verb}{'-' + sub if sub else ''}.md"


def _verb_page(verb: str, summary: str) -> str:
    subs = sub_verbs(verb)
    parts = [HEADER, f"# pipeline {verb}", "", inline(summary), "",
             f"Explained in the guides: {_guide_link(GUIDES[verb])}.", ""]
    if subs:
        parts += ["Sub-verbs: " + ", ".join(f"[`{verb} {s}`]({verb}-{s}.md)" for s in subs) + ".", ""]
    parts += [f"`pipeline {verb} --help`:", "", _block(help_text([verb]))]
    return "\n".join(parts)


def _sub_page(verb: str, sub: str) -> str:
    parser = _verbs_action(build_parser([verb])).choices[verb]
    said = _sentences_naming(parser.description or "", sub)
    guide = SUB_GUIDES[f"{verb} {sub}"]
    parts = [HEADER, f"# pipeline {verb} {sub}", ""]
    if said:
        parts += [inline(said), ""]
    parts += [f"Explained in the guides: {_guide_link(guide)}. "
              f"A sub-verb of [`pipeline {verb}`]({verb}.md), whose options it shares.", "",
              f"`pipeline {verb} {sub} --help`:", "", _block(help_text([verb, sub]))]
    return "\n".join(parts)


def _index_page(listed: list[tuple[str, str]]) -> str:
    rows = ["| command | what it does |", "|---|---|"]
    for verb, summary in listed:
        rows.append(f"| [`pipeline {verb}`]({verb}.md) | {inline(summary)} |")
        if subs := sub_verbs(verb):
            description = _verbs_action(build_parser([verb])).choices[verb].description or ""
            for sub in subs:
                said = _sentences_naming(description, sub) or f"a sub-verb of pipeline {verb}"
                rows.append(f"| [`pipeline {verb} {sub}`]({verb}-{sub}.md) | {inline(said)} |")
    return "\n".join([
        HEADER, "# Command reference", "",
        f"One page per command, each showing the command's own `--help` (at {WIDTH} columns). The pages are "
        "written from the parsers by `make docs-cli`, and `make test` fails when one no longer matches, so "
        "what you read here is what the installed `pipeline` accepts. Every command is also "
        "`.venv/bin/pipeline …`, or `python -m pipeline …` inside the virtual environment.", "",
        f"These pages were written with Python {sys.version_info.major}.{sys.version_info.minor} "
        "(argparse lays help out slightly differently from one Python version to the next).", "",
        *rows, "", "`pipeline --help`:", "", _block(help_text([])),
    ])


def pages() -> dict[str, str]:
    """Every page of the command reference: path under docs/ → content."""
    listed = verbs()
    out = {f"{CLI_DIR}/index.md": _index_page(listed)}
    for verb, summary in listed:
        out[page_name(verb)] = _verb_page(verb, summary)
        for sub in sub_verbs(verb):
            out[page_name(verb, sub)] = _sub_page(verb, sub)
    return out


def nav_lines(indent: str) -> list[str]:
    """The index, then every page in a section of its own (collapsed in the sidebar until opened)."""
    lines = [f"{indent}- {CLI_DIR}/index.md", f"{indent}- Every command:"]
    for verb, _ in verbs():
        lines.append(f"{indent}    - pipeline {verb}: {page_name(verb)}")
        lines += [f"{indent}    - pipeline {verb} {sub}: {page_name(verb, sub)}" for sub in sub_verbs(verb)]
    return lines


def mkdocs_yml(current: str) -> str:
    """mkdocs.yml with the lines between the two markers replaced by the reference's nav entries."""
    lines = current.split("\n")
    begin = next(i for i, line in enumerate(lines) if line.strip() == NAV_BEGIN)
    end = next(i for i, line in enumerate(lines) if line.strip() == NAV_END)
    indent = lines[begin][: len(lines[begin]) - len(lines[begin].lstrip())]
    return "\n".join([*lines[: begin + 1], *nav_lines(indent), *lines[end:]])


def differences(docs: Path = DOCS, mkdocs: Path = MKDOCS) -> list[str]:
    """Every file that differs from what the parsers would write (missing, changed, or left over)."""
    want = pages()
    stale = [name for name, text in want.items()
             if not (docs / name).is_file() or (docs / name).read_text(encoding="utf-8") != text]
    stale += [str(p.relative_to(docs)) for p in sorted((docs / CLI_DIR).glob("*.md"))
              if str(p.relative_to(docs)) not in want]
    current = mkdocs.read_text(encoding="utf-8")
    if mkdocs_yml(current) != current:
        stale.append(mkdocs.name)
    return stale


def write(docs: Path = DOCS, mkdocs: Path = MKDOCS) -> list[str]:
    """Rewrite the reference; returns the files that changed."""
    changed = differences(docs, mkdocs)
    want = pages()
    (docs / CLI_DIR).mkdir(parents=True, exist_ok=True)
    for old in (docs / CLI_DIR).glob("*.md"):
        if str(old.relative_to(docs)) not in want:
            old.unlink()
    for name, text in want.items():
        (docs / name).write_text(text, encoding="utf-8")
    mkdocs.write_text(mkdocs_yml(mkdocs.read_text(encoding="utf-8")), encoding="utf-8")
    return changed


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--check"]:
        stale = differences()
        for name in stale:
            sys.stderr.write(f"out of date: {name} (run make docs-cli)\n")
        return 1 if stale else 0
    if args:
        sys.stderr.write("usage: python -m pipeline.cli.reference [--check]\n")
        return 2
    changed = write()
    sys.stderr.write(f"command reference: {len(changed)} file(s) rewritten\n" if changed else "command reference: up to date\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
