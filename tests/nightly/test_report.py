"""The night report as a reviewer sees it, in a real browser: every memory's and task's evidence on the
page in its context, no table wider than the page, no id broken across lines, nothing from the network.

The browser tests need headless Chromium. Where it is absent (a user's machine) they say so and are
skipped; in CI (`CI` set, or `PIPELINE_REQUIRE_BROWSER=1`, which `.ci/run` exports) they fail instead.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from pipeline.corpus import tasks as tasks_mod
from pipeline.corpus.git_corpus import Corpus
from pipeline.secrets.redact import redacted

pytestmark = pytest.mark.slow

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
WIDTHS = (1280, 900)
# Measured inside the page once it has laid out: each table against the page, each id's line boxes.
MEASURE = """
<script>
(function () {
  var vw = document.documentElement.clientWidth;
  var tables = Array.prototype.map.call(document.querySelectorAll("table"), function (t, i) {
    var r = t.getBoundingClientRect();
    return {index: i, scrollWidth: t.scrollWidth, right: Math.round(r.right), left: Math.round(r.left),
            text: (t.innerText || "").slice(0, 60)};
  });
  var wrapped = Array.prototype.filter.call(document.querySelectorAll("code.id, code.cmd"), function (c) {
    return c.getClientRects().length > 1;
  }).map(function (c) { return c.textContent; });
  var wide = Array.prototype.filter.call(document.querySelectorAll(".card, .evidence, pre, img"), function (e) {
    return e.getBoundingClientRect().right > vw + 1;
  }).map(function (e) { return e.tagName + "." + e.className; });
  var out = document.createElement("script");
  out.type = "application/json";
  out.id = "layout-measure";
  out.textContent = JSON.stringify({viewport: vw, pageWidth: document.documentElement.scrollWidth,
                                    tables: tables, wrappedIds: wrapped, wideBlocks: wide});
  document.body.appendChild(out);
})();
</script>
"""


def chromium() -> str:
    """The Chromium to use, or a skip (a failure in CI) that says what is missing."""
    found = os.environ.get("PIPELINE_CHROMIUM") or next((p for b in BROWSERS if (p := shutil.which(b))), None)
    if found:
        return found
    message = ("headless Chromium is not installed (looked for " + ", ".join(BROWSERS) + " on PATH, and "
               "PIPELINE_CHROMIUM): the report's browser checks did not run. Install it, e.g. "
               "`apt-get install chromium`")
    if os.environ.get("CI") or os.environ.get("PIPELINE_REQUIRE_BROWSER"):
        pytest.fail(message)
    pytest.skip(message)


def browse(page: Path, *args: str, width: int = 1280, height: int = 2000) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--hide-scrollbars", f"--user-data-dir={profile}", f"--window-size={width},{height}",
               "--virtual-time-budget=5000", *args, page.absolute().as_uri()]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def night(samples_night: dict[str, Any]) -> dict[str, Any]:
    """The samples' night with the rules engine, report included (run once for all the tests)."""
    result = samples_night["result"]
    report = Path(result["report"])
    return {"result": result, "report": report, "html": report.read_text(encoding="utf-8"),
            "dir": Path(samples_night["dir"])}


def marked(page: str) -> list[str]:
    """The highlighted quotes of a page, as text."""
    return [html.unescape(m) for m in re.findall(r"<mark>(.*?)</mark>", page, flags=re.S)]


def test_the_page_loads_nothing_from_the_network(night: dict[str, Any]) -> None:
    page = night["html"]
    external = re.findall(r"""<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=\s*["']?(?:https?:)?//[^"'\s>]+""", page)
    external += re.findall(r"""@import\s+(?:url\()?["']?(?:https?:)?//[^"')\s]+""", page)
    external += re.findall(r"""url\(\s*["']?(?:https?:)?//[^"')\s]+""", page)
    assert external == []


def test_every_memory_and_task_shows_its_evidence_in_context(night: dict[str, Any]) -> None:
    page, run_dir, corpus = night["html"], Path(night["result"]["runDir"]), night["dir"] / "corpus"
    marks = marked(page)
    answers = [json.loads(p.read_text()) for p in sorted(run_dir.glob("b-*/answer.json"))]
    candidates = [c for a in answers for c in a["candidates"]]
    assert candidates, "the samples' night proposes memories"
    for cand in candidates:
        for ev in cand["evidence"]:
            assert redacted(ev["quote"]) in marks, ev["quote"]
    proposed = [d for _, d in tasks_mod.load_all(corpus) if d.status == "proposed"]
    assert proposed, "the samples' night proposes tasks"
    for task in proposed:
        assert task.evidence in marks, task.evidence
        card = page[page.index(f'id="{task.id}"'):]
        card = card[:card.index('<div class="actions">') + 400]
        assert f"pipeline tasks confirm {task.id}" in card and f"pipeline tasks reject {task.id}" in card
        assert f"line {task.line}" in card  # where it was said
    landed = {c.trailers["Memory-Id"] for c in Corpus(corpus).commits() if c.subject.startswith(("memory: ", "link: "))}
    assert landed
    for mid in landed:
        card = page[page.index(f'id="{mid}"'):]
        assert f"pipeline memories drop {mid} --why" in card[:card.index('<div class="actions">') + 400]
    # context, not just the quote: readable lines around it, with who said what
    assert page.count('<li class="ctx') >= 2 * len(marks)
    assert 'class="who">tool result (error)<' in page and 'class="who">user<' in page
    review = page[:page.index('id="Batches"')]
    assert "&quot;type&quot;:" not in review and '"type":' not in review  # message text, not raw JSON lines


def test_the_report_says_what_the_figures_count(night: dict[str, Any]) -> None:
    page = night["html"]
    assert "The consolidator's own model: none used tonight (the offline rules engine)" in page
    assert "cutover none given" in page and "after cutover" not in page
    assert "<td>applied</td>" in page
    # Written during the night's last step, the page already says the night is done and when.
    assert "status done" in page and "status reporting" not in page and "→ <span class=\"nowrap\">…" not in page


def test_the_header_of_a_page_written_while_reporting_says_done() -> None:
    import datetime as dt

    import polars as pl

    from pipeline.nightly.report import header_html

    started = dt.datetime(2026, 12, 1, 2, 0, tzinfo=dt.UTC)
    run = pl.DataFrame([{"engine": "rules", "model": None, "status": "reporting", "started_at": started,
                         "finished_at": None}])
    head = header_html("r1", {"run": run, "day": "2026-12-01"})
    assert "status done" in head and "report written 20" in head and "…" not in head
    failed = header_html("r1", {"run": run.with_columns(pl.lit("failed").alias("status"))})
    assert "status failed" in failed and "report written 20" in failed


@pytest.mark.parametrize("width", WIDTHS)
def test_in_a_browser_no_table_is_wider_than_the_page_and_no_id_wraps(night: dict[str, Any], width: int) -> None:
    measured = night["report"].with_name(f"report.measure-{width}.html")
    measured.write_text(night["html"].replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    out = browse(measured, "--dump-dom", width=width)
    assert out.returncode == 0, out.stderr[-2000:]
    found = re.search(r'<script type="application/json" id="layout-measure">(.*?)</script>', out.stdout, flags=re.S)
    assert found, "the measuring script did not run: " + out.stdout[-500:]
    layout = json.loads(html.unescape(found.group(1)))
    viewport = layout["viewport"]
    assert layout["tables"], "the page has tables"
    for t in layout["tables"]:
        assert t["right"] <= viewport + 1 and t["scrollWidth"] <= viewport, t
    assert layout["pageWidth"] <= viewport, "the page scrolls sideways"
    assert layout["wrappedIds"] == []
    assert layout["wideBlocks"] == []


def test_a_screenshot_of_the_page(night: dict[str, Any], tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    out = browse(night["report"], f"--screenshot={shot}", height=6000)
    assert out.returncode == 0, out.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000  # a page, not a blank
    keep = os.environ.get("PIPELINE_REPORT_SCREENSHOT")
    if keep:  # for a person to look at
        shutil.copyfile(shot, keep)


def test_a_memory_many_batches_linked_is_one_card_with_its_first_quotes() -> None:
    from pipeline.nightly import report

    many = report.MemoryItem(memory_id="error_pattern-1a2b", kind="error_pattern", claim="`npm test` needs <node 22>",
                             gist="", how="memory", batch_id="b-1", sessions_total=40, in_corpus=True, status="new",
                             batches=12, quotes=37, file="error_pattern/npm-test-needs-node-22.md")
    once = report.MemoryItem(memory_id="procedural-9f", kind="procedural", claim="run `make lint` first", gist="",
                             how="link", batch_id="b-2", sessions_total=3, in_corpus=True, status="new")
    page = report.memory_cards(report.Review(memories=[many, once]))
    assert page.count('class="card memory"') == 2
    first = page[:page.index('id="procedural-9f"')]
    assert "batch <code class=\"id\">b-1</code> and 11 more tonight" in first
    assert "the first 0 of tonight&#39;s 37 quotes" in first or "the first 0 of tonight's 37 quotes" in first
    assert "git log -- error_pattern/npm-test-needs-node-22.md" in first
    assert "&lt;node 22&gt;" in first  # data, never markup
    second = page[page.index('id="procedural-9f"'):]
    assert "more tonight" not in second and "evidence (0 quote(s)" in second
