"""`pipeline check-real`: the invariants of real transcripts, run here on the sample corpus (tests never
read ../shared/), and what the command does when an invariant fails or the folder is missing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli import fidelity  # registers "views show values", as `pipeline check-real` does
from pipeline.errors import UsageError
from pipeline.warehouse import checks, db, ingest
from tests.helpers import EXPECTED, SAMPLES, write_jsonl

NAMES = ["no negative count", "usage = recount", "exit codes", "prompts agree", "byte-exact lines",
         "model not recorded", "formats", "secrets", "cache causes", "session facts", "views show values"]


@pytest.fixture(scope="module")
def report() -> checks.CheckReport:
    return checks.run_checks(SAMPLES)


def test_every_invariant_holds_on_the_samples(report: checks.CheckReport) -> None:
    assert [r.name for r in report.results] == NAMES
    assert report.ok, report.lines()
    assert report.files == len(EXPECTED["sessions"])


def test_the_cache_cause_invariants_on_the_samples(report: checks.CheckReport) -> None:
    cache = {r.name: r for r in report.results}["cache causes"]
    assert cache.ok and cache.figures["hitsWithMissCause"] == 0
    # the samples' one compaction record is followed by a call that read its prompt back
    assert cache.figures["compactions"] == 1 and cache.figures["compactionCauses"] == {"hit": 1}


def test_a_date_notice_makes_the_next_call_a_crossing(tmp_path: Path) -> None:
    def line(n: int, at: str, **extra: object) -> dict:
        return {"type": "assistant", "sessionId": "s", "uuid": f"u{n}", "timestamp": at, "version": "2.1.90",
                "requestId": f"r{n}", "message": {"id": f"m{n}", "role": "assistant", "model": "claude-sonnet-4-6",
                                                  "content": [{"type": "text", "text": "ok"}],
                                                  "usage": {"input_tokens": 10, "cache_read_input_tokens": 1000 * n,
                                                            "cache_creation_input_tokens": 100, "output_tokens": 5}},
                **extra}
    folder = tmp_path / "real"
    folder.mkdir()
    write_jsonl(folder / "s.jsonl", [
        {"type": "user", "sessionId": "s", "uuid": "p1", "timestamp": "2026-05-06T20:59:00Z", "version": "2.1.90",
         "message": {"role": "user", "content": "hello"}},
        line(1, "2026-05-06T20:59:10Z"),
        {"type": "attachment", "sessionId": "s", "uuid": "d1", "timestamp": "2026-05-06T21:01:21Z", "version": "2.1.90",
         "attachment": {"type": "date_change", "newDate": "2026-05-07"}},
        line(2, "2026-05-06T21:01:30Z"),
    ])
    cache = {r.name: r for r in checks.run_checks(folder).results}["cache causes"]
    assert cache.ok, cache.failures
    assert (cache.figures["dateNotices"], cache.figures["crossings"]) == (1, 1)


def test_the_figures_match_the_planted_corpus(report: checks.CheckReport) -> None:
    by = {r.name: r for r in report.results}
    calls = sum(s["usage"]["calls"] for s in EXPECTED["sessions"])
    usage = by["usage = recount"].figures
    assert usage["codex"]["calls"] + usage["claude-code"]["calls"] == calls
    assert by["exit codes"].figures["codexErrors"] + by["exit codes"].figures["claudeErrors"] == len(EXPECTED["tool_errors"])
    assert by["prompts agree"].figures["prompts"] == sum(s["prompts"] for s in EXPECTED["sessions"])
    assert set(by["model not recorded"].figures["ids"]) == set(EXPECTED["real_log_quirks"]["model_not_recorded"])
    assert by["formats"].figures["codexLegacy"] == 1
    assert by["byte-exact lines"].figures["exact"] == sum(s["lines"] for s in EXPECTED["sessions"])


def test_each_invariant_prints_one_line_with_its_figures(report: checks.CheckReport) -> None:
    lines = report.lines()
    assert len(lines) == len(NAMES)
    assert lines[0].startswith("ok   no negative count: ") and "0 with a negative count" in lines[0]
    assert lines[-5].startswith("info formats: ")
    assert lines[-4].startswith("info secrets: ")
    assert lines[-3].startswith("ok   cache causes: ") and "got a miss cause" in lines[-3]
    assert lines[-2].startswith("ok   session facts: ")
    assert lines[-1].startswith("ok   views show values: ") and lines[-1].endswith("; 0 differ")


def test_the_secrets_line_counts_found_and_masked_per_kind(report: checks.CheckReport, tmp_path: Path) -> None:
    # The samples hold one development password, in a test's connection URL shown twice on one line.
    samples = next(r for r in report.results if r.name == "secrets")
    assert samples.figures["found"] == {"url-password": 1} and samples.figures["masked"] == {"url-password": 2}
    assert "url-password 1/2" in samples.summary
    key = "sk_live_51" + "Qx7Lm2Np4Rs6Tv8Wy0Za3Bc5De9Fg1Hj"  # generated here, in two pieces
    lines = [{"role": "tool", "content": f"stripe.error.AuthenticationError: Invalid API Key provided: {key}"},
             {"role": "user", "content": f"retry with {key} and mail ana.lopez@northwind-traders.io"}]
    write_jsonl(tmp_path / "real" / "s.jsonl", lines)
    planted = next(r for r in checks.run_checks(tmp_path / "real").results if r.name == "secrets")
    assert planted.ok is None
    assert planted.figures["found"] == {"email": 1, "stripe-key": 1}
    assert planted.figures["masked"] == {"email": 1, "stripe-key": 2}
    assert key not in planted.summary and key not in json.dumps(planted.figures)


def test_a_broken_invariant_fails_and_names_where(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    with db.writing(path) as con:
        ingest.ingest(con, [SAMPLES])
        sid = EXPECTED["real_log_quirks"]["codex_totals"]["sessionId"]
        con.execute("UPDATE lines SET text = text || ' ' WHERE session_id = ? AND line_no = 3", [sid])
        con.execute("UPDATE llm_calls SET completion_tokens = completion_tokens + 1 WHERE session_id = ? AND line_no = "
                    "(SELECT min(line_no) FROM llm_calls WHERE session_id = ?)", [sid, sid])
        rows = con.execute("SELECT session_id, path, format FROM sessions").fetchall()
        real = checks.RealSet(con, SAMPLES, {r[0]: Path(r[1]) for r in rows}, {r[0]: r[2] for r in rows})
        fns = dict(checks.INVARIANTS)
        byte_exact = fns["byte-exact lines"](real)
        usage = fns["usage = recount"](real)
    assert byte_exact.ok is False and byte_exact.failures == [f"{sid}:3: the stored text differs from the file's bytes"]
    assert usage.ok is False and usage.failures[0].startswith(f"{sid} (codex): warehouse ")


def test_an_added_invariant_gets_its_own_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checks, "INVARIANTS", list(checks.INVARIANTS))

    @checks.invariant("sessions")
    def _count(real: checks.RealSet) -> checks.CheckResult:
        return checks.CheckResult("sessions", None, f"{len(real.paths)} sessions")

    out = checks.run_checks(SAMPLES)
    assert out.results[-1].line() == f"info sessions: {len(EXPECTED['sessions'])} sessions"


def test_a_missing_folder_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no folder of real transcripts"):
        checks.run_checks(tmp_path / "nowhere")


def test_the_command_exits_2_on_a_missing_folder_and_prints_json(tmp_path: Path) -> None:
    missing = subprocess.run([sys.executable, "-m", "pipeline", "check-real", str(tmp_path / "nowhere"), "--json"],
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2
    assert "no folder of real transcripts" in json.loads(missing.stdout)["error"]
    empty = tmp_path / "empty"
    empty.mkdir()
    none = subprocess.run([sys.executable, "-m", "pipeline", "check-real", str(empty)], capture_output=True, text=True, timeout=120)
    assert none.returncode == 2 and "holds no *.jsonl transcript" in none.stderr


def test_widths_measured_once_are_rich_own_widths() -> None:
    from rich import cells

    texts = ["plain ascii " * 60, "wide 漢字 and an arrow → " * 40, "a family 👨\u200d👩\u200d👧 and ❤\ufe0f " * 30,
             "tab\tand\x00nul " * 50, "é" * 600, ""]
    expected = [cells.cell_len(t) for t in texts]
    with fidelity._widths_measured_once():
        assert [cells.cell_len(t) for t in texts] == expected
        assert [cells.cell_len(t) for t in texts] == expected  # and again, measured before
    assert cells._cell_len.__module__ == "rich.cells"  # rich's own function is back
