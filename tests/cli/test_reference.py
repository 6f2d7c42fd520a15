"""The command reference (docs/cli/) is what the commands print: a changed flag, default or help text
without `make docs-cli` fails here. Pages are compared whole on the Python version they were written
with (argparse's layout changes a little between versions); on another version every page must still
hold its command's usage line and every one of its options."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

import pytest

from pipeline.cli import reference
from tests.helpers import REPO

WRITTEN_WITH = re.search(r"written with Python (\d+)\.(\d+)", (REPO / "docs" / "cli" / "index.md").read_text(encoding="utf-8"))
SAME_PYTHON = WRITTEN_WITH is not None and (int(WRITTEN_WITH[1]), int(WRITTEN_WITH[2])) == sys.version_info[:2]


def _listed_verbs() -> list[str]:
    """The verbs `pipeline --help` lists, read from the real command's output (not from the parsers)."""
    out = subprocess.run([sys.executable, "-m", "pipeline", "--help"], cwd=REPO, capture_output=True, text=True,
                         env={"COLUMNS": "80", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}, check=True)
    block = out.stdout.split("positional arguments:", 1)[1].split("\noptions:", 1)[0]
    return re.findall(r"^    ([a-z][a-z-]*)\b", block, re.M)


LISTED = _listed_verbs()


def _page(verb: str, sub: str | None = None) -> str:
    path = REPO / "docs" / reference.page_name(verb, sub)
    assert path.is_file(), f"`pipeline {verb}{' ' + sub if sub else ''}` has no page: run make docs-cli"
    return path.read_text(encoding="utf-8")


def _verb_parser(verb: str) -> argparse.ArgumentParser:
    from pipeline.cli.main import build_parser

    sub = next(a for a in build_parser([verb])._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[verb]


@pytest.mark.skipif(not SAME_PYTHON, reason="pages written with another Python: see the per-option test")
def test_the_pages_are_what_the_commands_print() -> None:
    stale = reference.differences()
    assert not stale, f"the command reference is out of date ({', '.join(stale)}): run `make docs-cli`"


def test_every_verb_of_pipeline_help_is_listed_and_paged() -> None:
    assert len(LISTED) >= 20, LISTED
    assert [verb for verb, _ in reference.verbs()] == LISTED
    index = (REPO / "docs" / "cli" / "index.md").read_text(encoding="utf-8")
    for verb in LISTED:
        assert f"]({verb}.md)" in index, f"docs/cli/index.md does not link `pipeline {verb}`"


@pytest.mark.parametrize("verb", LISTED)
def test_each_page_holds_its_usage_line_and_every_option(verb: str) -> None:
    parser = _verb_parser(verb)
    with reference._fixed_width():
        usage = " ".join(parser.format_usage().split())
    options = [s for a in parser._actions for s in a.option_strings]
    for sub in [None, *reference.sub_verbs(verb)]:
        page = _page(verb, sub)
        shown = " ".join(page.split())
        assert usage in shown, f"docs/{reference.page_name(verb, sub)} lacks the current usage line: run make docs-cli"
        missing = [o for o in options if o not in page]
        assert not missing, f"docs/{reference.page_name(verb, sub)} does not show {missing}: run make docs-cli"


def test_sub_verbs_are_the_choices_of_the_action_argument() -> None:
    assert reference.sub_verbs("memories") == ["keep", "drop", "export"]
    assert reference.sub_verbs("tasks") == ["confirm", "reject", "done"]
    assert {f"{v} {s}" for v in LISTED for s in reference.sub_verbs(v)} == set(reference.SUB_GUIDES)


def test_no_page_is_left_over_and_every_verb_names_its_guide() -> None:
    on_disk = {p.name for p in (REPO / "docs" / "cli").glob("*.md")}
    assert on_disk == {name.split("/", 1)[1] for name in reference.pages()}
    assert set(reference.GUIDES) == set(LISTED)


def test_help_is_laid_out_at_the_fixed_width_whatever_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    narrow_terminal = reference.help_text(["search"])
    monkeypatch.delenv("COLUMNS")
    assert narrow_terminal == reference.help_text(["search"])
    assert max(len(line) for line in narrow_terminal.splitlines()) <= reference.WIDTH
    assert len(narrow_terminal.splitlines()[0]) > 40


def test_help_text_in_a_page_is_shown_as_text_never_markup() -> None:
    assert reference.plain("a <b> *c* `d` [e](f) | g") == r"a \<b\> \*c\* \`d\` \[e\]\(f\) \| g"
    page = _page("memories", "keep")
    fence = page.index("```text")
    assert "pipeline memories keep ID" in page[:fence]
