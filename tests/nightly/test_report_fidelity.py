"""A night report over transcripts whose project folders look like e-mail addresses, in a real browser.

A real home had `-Users-<name>-uw-…` folders beside text the e-mail detector takes for an address; the
report once scrubbed its finished HTML, cut through a `</code>` and rendered the rest one word per
line. Values are masked before rendering now: the page's tags balance, every id shows as it is, the
planted address never shows, and no element is narrower than its own text.
"""

from __future__ import annotations

import html
import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from pipeline.warehouse import db
from tests.helpers import CHECKOUT, built_once, planted_samples
from tests.nightly.test_report import browse
from tests.nightly.test_secrets_night import run_night

pytestmark = pytest.mark.slow

# A home folder named after the planted address's local part, under a folder named after its domain:
# the project's slug then holds every letter of the address (what the old scrubber took for a leak).
EMAIL_CWD = "/Users/maria.gonzalez/acme-billing.io/checkout-api"
EMAIL_FOLDER = "-Users-maria-gonzalez-acme-billing-io-checkout-api"

# Each element that holds text, against its own box: a box narrower than the longest word it holds
# (one word per line, the failure seen) or text running out of a box that does not scroll.
MEASURE = """
<script>
(function () {
  var narrow = [];
  document.querySelectorAll("main *, body > div *").forEach(function (e) {
    if (!e.childNodes.length || e.closest("script, style")) return;
    var own = Array.prototype.some.call(e.childNodes, function (n) { return n.nodeType === 3 && n.textContent.trim(); });
    if (!own) return;
    var style = getComputedStyle(e);
    if (style.display === "none" || style.visibility === "hidden") return;
    var scrolls = /auto|scroll|hidden/.test(style.overflowX);
    if (!scrolls && e.scrollWidth > e.clientWidth + 1 && e.clientWidth > 0 && style.display !== "inline") {
      narrow.push({tag: e.tagName, cls: e.className, text: e.textContent.slice(0, 60), box: e.clientWidth, text_width: e.scrollWidth});
    }
    if (e.matches("code.id") && e.getClientRects().length > 1) {
      narrow.push({tag: e.tagName, cls: e.className, text: e.textContent.slice(0, 60), wrapped: e.getClientRects().length});
    }
  });
  if (document.documentElement.scrollWidth > document.documentElement.clientWidth + 1) {
    narrow.push({tag: "HTML", cls: "", text: "the page scrolls sideways", box: document.documentElement.clientWidth,
                 text_width: document.documentElement.scrollWidth});
  }
  var out = document.createElement("script");
  out.type = "application/json"; out.id = "fidelity-measure";
  out.textContent = JSON.stringify({narrow: narrow, codes: document.querySelectorAll("code.id").length});
  document.body.appendChild(out);
})();
</script>
"""


class _Tags(HTMLParser):
    VOID = frozenset({"meta", "br", "img", "hr", "input", "link", "col", "wbr", "source", "area", "base"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.bad: list[tuple[str, str]] = []
        self.ids: list[str] = []
        self._in_id = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.VOID:
            return
        self.stack.append(tag)
        if tag == "code" and ("class", "id") in attrs:
            self._in_id = len(self.stack)
            self.ids.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.bad.append((tag, self.stack[-1] if self.stack else ""))
            return
        if self._in_id == len(self.stack):
            self._in_id = 0
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        if self._in_id:
            self.ids[-1] += data


@pytest.fixture(scope="module")
def email_night(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    def build(tmp: Path) -> dict[str, Any]:
        planted = planted_samples(tmp / "samples")
        projects = tmp / "samples" / "claude" / "projects"
        shutil.move(projects / CHECKOUT, projects / EMAIL_FOLDER)
        for f in (tmp / "samples").rglob("*.jsonl"):
            f.write_text(f.read_text(encoding="utf-8").replace("/home/ana/src/checkout-api", EMAIL_CWD), encoding="utf-8")
        return {"dir": str(tmp), "planted": planted, "summary": run_night(tmp, tmp / "samples", "--engine", "rules")}

    return built_once(tmp_path_factory, "email-folder-night", build)


def _report(night: dict[str, Any]) -> Path:
    return Path(night["summary"]["report"])


def test_the_report_shows_e_mail_shaped_folders_as_they_are_and_never_the_address(email_night: dict[str, Any]) -> None:
    page = _report(email_night).read_text(encoding="utf-8")
    tags = _Tags()
    tags.feed(page)
    tags.close()
    assert tags.bad == [] and tags.stack == []
    with db.reading(Path(email_night["dir"]) / "w.duckdb") as con:
        known = {str(v) for row in con.execute("SELECT session_id, slug FROM sessions").fetchall() for v in row if v}
    assert EMAIL_FOLDER in tags.ids  # the folder shows whole, inside its own element
    for shown in tags.ids:
        assert "REDACTED" not in shown and "<" not in shown, shown
    assert {i for i in tags.ids if i.startswith("-")} <= known
    assert email_night["planted"]["email"] not in html.unescape(page)


def test_in_a_browser_no_element_is_narrower_than_its_text(email_night: dict[str, Any], tmp_path: Path) -> None:
    report = _report(email_night)
    measured = tmp_path / "report.measure.html"
    measured.write_text(report.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    for width in (1280, 900):
        out = browse(measured, "--dump-dom", width=width)
        assert out.returncode == 0, out.stderr[-2000:]
        found = re.search(r'<script type="application/json" id="fidelity-measure">(.*?)</script>', out.stdout, flags=re.S)
        assert found, "the measuring script did not run: " + out.stdout[-500:]
        layout = json.loads(html.unescape(found.group(1)))
        assert layout["codes"] > 10
        assert layout["narrow"] == [], (width, layout["narrow"][:5])
