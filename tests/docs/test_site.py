"""The documentation site builds with `mkdocs build --strict` (every page in the nav, every link and
anchor resolves, every included file exists), loads nothing from another host, and its pages keep the
promises the issue asked of them: every error class on the troubleshooting page, every table and view of
the warehouse with all its columns on the exploring page, a README that stays a front door."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from pipeline import errors
from tests.helpers import REPO

DOCS = REPO / "docs"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                           cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, f"`make docs` fails:\n{build.stderr[-4000:]}"
    return out


def test_the_site_builds_strictly_with_every_page(site: Path) -> None:
    for page in DOCS.rglob("*.md"):
        built = site / page.relative_to(DOCS).with_suffix(".html")
        assert built.is_file(), f"{page.relative_to(REPO)} was not built"


# A reference to another host in markup a browser loads: script or style sources, stylesheets,
# fonts, images, frames, CSS imports and url()s.
REMOTE = [
    re.compile(r"""<(?:script|img|iframe|source|audio|video|embed)\b[^>]*\bsrc\s*=\s*["']?(?:https?:)?//""", re.I),
    re.compile(r"""<link\b(?=[^>]*\brel\s*=\s*["']?(?:stylesheet|preload|preconnect|dns-prefetch|icon|modulepreload|manifest))"""
               r"""[^>]*\bhref\s*=\s*["']?(?:https?:)?//""", re.I),
    re.compile(r"""<link\b[^>]*\bhref\s*=\s*["']?(?:https?:)?//[^"'>]*(?:\.css|\.js|fonts)""", re.I),
    re.compile(r"""@import\s+(?:url\()?\s*["']?(?:https?:)?//""", re.I),
    re.compile(r"""url\(\s*["']?(?:https?:)?//""", re.I),
    re.compile(r"fonts\.(?:googleapis|gstatic)\.com|googletagmanager|google-analytics|unpkg\.com|jsdelivr", re.I),
]


def test_the_built_site_fetches_nothing_from_another_host(site: Path) -> None:
    offending = []
    for path in [*site.rglob("*.html"), *site.rglob("*.css")]:
        text = path.read_text(encoding="utf-8", errors="replace")
        for pattern in REMOTE:
            for match in pattern.finditer(text):
                offending.append(f"{path.relative_to(site)}: {text[match.start():match.start() + 120]!r}")
    assert not offending, "the site loads something from the network:\n" + "\n".join(offending[:20])
    mkdocs = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    assert re.search(r"^\s*font:\s*false\s*$", mkdocs, re.M), "theme.font must stay false (no web fonts)"
    assert not re.search(r"^\s*analytics:", mkdocs, re.M), "no analytics in the site"


def test_the_remote_patterns_catch_what_material_would_add() -> None:
    samples = ['<script src="https://unpkg.com/iframe-worker/shim">',
               '<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Roboto">',
               "@import url(https://example.org/x.css);", "background: url('//cdn.example.org/a.png')"]
    assert all(any(p.search(s) for p in REMOTE) for s in samples)
    assert not any(p.search('<a href="https://github.com/x">') for p in REMOTE)  # a link is not a fetch


def test_every_error_class_is_on_the_troubleshooting_page() -> None:
    page = (DOCS / "troubleshooting.md").read_text(encoding="utf-8")
    headings = set(re.findall(r"^## (\w+)\s*$", page, re.M))
    classes = {name for name in errors.__all__ if isinstance(getattr(errors, name), type)}
    assert classes <= headings, f"errors without a section on docs/troubleshooting.md: {sorted(classes - headings)}"


def test_every_table_and_view_is_on_the_exploring_page_with_every_column(samples_warehouse: Path) -> None:
    page = (DOCS / "exploring.md").read_text(encoding="utf-8")
    rows = {m[1]: re.search(r"`([^`]*)`", m[2])[1]  # the first code span of the last cell: the columns
            for m in re.finditer(r"^\| `(\w+)`[^|]*\|[^|]*\| ([^|]*`[^|]*) \|$", page, re.M)}
    con = duckdb.connect(str(samples_warehouse), read_only=True)
    try:
        columns: dict[str, list[str]] = {}
        for table, column in con.execute(
                "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'main' "
                "ORDER BY table_name, ordinal_position").fetchall():
            columns.setdefault(table, []).append(column)
    finally:
        con.close()
    missing_tables = sorted(set(columns) - set(rows))
    assert not missing_tables, f"docs/exploring.md has no row for {missing_tables}"
    for table, names in columns.items():
        documented = [c.strip() for c in rows[table].split(",")]
        if len(documented) == 1 and documented[0] in columns:  # "the columns of `llm_calls`"
            documented = columns[documented[0]]
        assert documented == names, f"docs/exploring.md lists {table} as {documented}, the warehouse has {names}"


def test_the_readme_is_a_front_door() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    setup = readme.split("## Setup", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"^(make \S+)", setup, re.M)
    assert commands == ["make demo", "make test"], commands
    # no dated measurements: figures with a date or a lettered run belong to docs/speed.md and bench/HISTORY.md
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b.{0,80}\d+(\.\d+)? ?(s|ms|min|MB|GB)\b", readme), "a dated measurement"
    assert not re.search(r"\bruns? [A-K]\b", readme)
