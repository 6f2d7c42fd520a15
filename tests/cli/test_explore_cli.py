"""The explorer verbs from the command line: search, show, sessions and usage, on the sample warehouse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.cli.main import main


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables as a wide terminal shows them, whatever width the test process inherited (a narrow
    terminal drops or cuts columns by design)."""
    monkeypatch.setenv("COLUMNS", "220")


def run(capsys, argv: list[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_search_json_has_the_interface_shape(wh: Path, capsys) -> None:
    code, out, _ = run(capsys, ["search", "pytest", "--json", "--limit", "2", "--db", str(wh)])
    doc = json.loads(out)
    assert code == 0 and {"phrase", "total", "truncated", "hits"} <= set(doc)
    assert doc["total"] > 2 and doc["truncated"] and len(doc["hits"]) == 2
    assert all({"sessionId", "line", "column", "at", "role", "before", "match", "after"} <= set(h) for h in doc["hits"])


def test_the_old_per_session_form_is_one_session(wh: Path, capsys) -> None:
    _, out, _ = run(capsys, ["search", "pytest", "--json", "--limit", "1000", "--db", str(wh)])
    sid = json.loads(out)["hits"][0]["sessionId"]
    _, one, _ = run(capsys, ["search", sid, "pytest", "--json", "--limit", "1000", "--db", str(wh)])
    _, flag, _ = run(capsys, ["search", "pytest", "--session", sid, "--json", "--limit", "1000", "--db", str(wh)])
    assert json.loads(one) == json.loads(flag) and {h["sessionId"] for h in json.loads(one)["hits"]} == {sid}


def test_search_text_names_the_hit_and_the_count(wh: Path, capsys) -> None:
    code, out, err = run(capsys, ["search", "ModuleNotFoundError", "--limit", "1", "--json", "--db", str(wh)])
    hit = json.loads(out)["hits"][0]
    code, out, err = run(capsys, ["search", "ModuleNotFoundError", "--limit", "1", "--db", str(wh)])
    place, *body = out.splitlines()
    assert code == 0 and "occurrence(s) in" in err
    # the place names line, column and length; the text is the transcript's, with no mark added to it
    assert f"  {hit['line']}:{hit['column']}  +19  " in place
    assert "\n".join(line.removeprefix("    ") for line in body) == hit["before"] + hit["match"] + hit["after"]
    assert "[ModuleNotFoundError]" not in out


def test_search_ignore_case_finds_every_case_and_reports_the_original_text(wh: Path, capsys) -> None:
    _, exact, _ = run(capsys, ["search", "ModuleNotFoundError", "--json", "--limit", "1000", "--db", str(wh)])
    _, folded, _ = run(capsys, ["search", "-i", "modulenotfounderror", "--json", "--limit", "1000", "--db", str(wh)])
    _, none, _ = run(capsys, ["search", "modulenotfounderror", "--json", "--db", str(wh)])
    e, f = json.loads(exact), json.loads(folded)
    assert json.loads(none)["total"] == 0 and f["ignoreCase"] is True
    assert f["total"] >= e["total"] > 0
    assert {(h["sessionId"], h["line"], h["column"]) for h in e["hits"]} <= {(h["sessionId"], h["line"], h["column"]) for h in f["hits"]}
    assert all(h["match"].lower() == "modulenotfounderror" for h in f["hits"])


def test_show_in_every_form(wh: Path, tmp_path: Path, capsys) -> None:
    _, out, _ = run(capsys, ["search", "ModuleNotFoundError", "--json", "--db", str(wh)])
    hit = json.loads(out)["hits"][0]
    sid, line = hit["sessionId"], hit["line"]
    code, text, _ = run(capsys, ["show", sid, str(max(1, line - 2)), str(line + 2), "--hit", "ModuleNotFoundError", "--db", str(wh)])
    assert code == 0 and "tool result" in text
    code, md, _ = run(capsys, ["show", sid, "--markdown", "--db", str(wh)])
    assert code == 0 and md.startswith(f"# Session `{sid}`")
    page = tmp_path / "s.html"
    code, _, err = run(capsys, ["show", sid, "--html", str(page), "--db", str(wh)])
    assert code == 0 and page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>") and "wrote" in err
    code, out, _ = run(capsys, ["show", sid, "--json", "--db", str(wh)])
    assert code == 0 and json.loads(out)["sessionId"] == sid


@pytest.mark.parametrize(("argv", "needle"), [
    (["show", "nope"], "unknown session"),
    (["show", "S", "3"], "FROM and TO"),
    (["show", "S", "--markdown", "--html", "x.html"], "not allowed with"),
    (["sessions", "--sort", "colour"], "--sort"),
    (["usage", "hourly"], "invalid choice"),
    (["usage", "daily", "--since", "yesterday"], "is not a day"),
    (["search", "x", "--since", "2026-13-01"], "is not a day"),
])
def test_explorer_usage_errors_exit_2(wh: Path, capsys, argv: list[str], needle: str) -> None:
    code, _, err = run(capsys, [*argv, "--db", str(wh)])
    assert code == 2 and needle in err and "Traceback" not in err


def test_sessions_filters_sort_and_limit_from_the_command_line(wh: Path, capsys) -> None:
    code, out, _ = run(capsys, ["sessions", "--format", "codex", "--sort", "totalTokens", "--desc", "--limit", "2", "--json",
                                "--db", str(wh)])
    rows = json.loads(out)
    assert code == 0 and len(rows) == 2 and rows[0]["totalTokens"] >= rows[1]["totalTokens"]
    assert {r["format"] for r in rows} == {"codex"}
    code, text, _ = run(capsys, ["sessions", "--limit", "1", "--db", str(wh)])
    assert code == 0 and "harness" in text and "tokens" in text
    code, text, _ = run(capsys, ["sessions", "--project", "/nowhere", "--db", str(wh)])
    assert code == 0 and "no session matches" in text


@pytest.mark.parametrize(("report", "array"), [("daily", "daily"), ("weekly", "weekly"), ("monthly", "monthly"),
                                                ("session", "sessions"), ("blocks", "blocks")])
def test_usage_json_uses_ccusage_names(wh: Path, capsys, report: str, array: str) -> None:
    code, out, _ = run(capsys, ["usage", report, "--json", "--db", str(wh)])
    doc = json.loads(out)
    assert code == 0 and set(doc) == {array, "totals"} and doc[array]
    assert {"inputTokens", "cacheCreationTokens", "cacheReadTokens", "outputTokens", "totalTokens", "totalCost",
            "modelsUsed", "modelBreakdowns"} <= set(doc[array][0])
    code, table, _ = run(capsys, ["usage", report, "--breakdown", "--db", str(wh)])
    assert code == 0 and "total" in table and "└" in table
