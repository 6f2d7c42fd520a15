"""`pipeline eval` end to end over the samples: the rules engine and the openai engine (fake server).

The gold files here are built from what the engine proposes in a first run, so every expected figure
is computed by hand from the construction; no figure says how good an engine is.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from pipeline.cli.main import main
from pipeline.consolidator.quotes import WarehouseQuotes
from pipeline.warehouse import db
from tests.fakes.openai_server import FakeOpenAI, call, tool_turn
from tests.helpers import write_jsonl

CHECKOUT = [  # the four main sessions of the checkout-api project of the samples
    "01a16429-82e6-7f9b-8a2a-d5fcc8ee2920",
    "7a6738d0-a8f0-4bb2-bf15-e9ff77de2e75",
    "94d17458-e734-483d-b466-8395216e13a2",
    "e21ab715-308b-4e52-b34b-38dd65332483",
]
A1, A2 = CHECKOUT[1], CHECKOUT[2]
MOD_A1 = "ModuleNotFoundError: No module named 'respx'"
MOD_A2 = "ModuleNotFoundError: No module named 'freezegun'"
PROMISE_A1 = "I'll add a regression test for the date parser after this lands."


def reviewed(*ids: str) -> list[dict[str, Any]]:
    return [{"type": "reviewed", "sessionId": s} for s in ids]


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def run_json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, dict[str, Any]]:
    code, out, _ = run(capsys, [*argv, "--json"])
    return code, json.loads(out)  # exactly one JSON document on stdout


def line_of(wh: Path, session_id: str, quote: str) -> int:
    with db.reading(wh) as con:
        found = WarehouseQuotes(con).lines_with(session_id, quote, 1)
    assert found, (session_id, quote)
    return found[0]


def proposals(out_dir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    cands: list[dict[str, Any]] = []
    coms: list[dict[str, Any]] = []
    for answer in sorted(out_dir.glob("*/answer.json")):
        data = json.loads(answer.read_text(encoding="utf-8"))
        cands += data["candidates"]
        coms += data["commitments"]
    return cands, coms


def ev(wh: Path, item: dict[str, Any]) -> dict[str, Any]:
    first = item["evidence"][0]
    return {"sessionId": first["sessionId"], "line": line_of(wh, first["sessionId"], first["quote"]), "quote": first["quote"]}


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_rules_engine_scoring_arithmetic_on_the_samples(samples_copy: Path, tmp_path: Path, capsys) -> None:
    wh = samples_copy
    before = digest(wh)
    # First run: no labelled items, so every proposal is unmatched and every figure has nothing to count.
    g0 = write_jsonl(tmp_path / "g0.jsonl", reviewed(*CHECKOUT))
    code, doc = run_json(capsys, ["eval", "--gold", str(g0), "--db", str(wh), "--engine", "rules", "--out", str(tmp_path / "r0")])
    assert code == 0 and doc["engine"] == "rules"
    cands, coms = proposals(tmp_path / "r0")
    assert len(cands) >= 2 and len(coms) >= 3, "the construction below needs 2 memory and 3 commitment proposals"
    assert doc["memories"] == {"proposed": len(cands), "matched": 0, "borderline_only": 0, "unmatched": len(cands),
                               "precision": 0.0, "recall": None, "clear": 0, "found": 0}
    assert len(doc["unmatchedExamples"]["memories"]) == len(cands)

    # A line no proposal cites, away from every proposal's evidence: the first prompt of a session.
    cited = {(e["sessionId"], line_of(wh, e["sessionId"], e["quote"])) for p in cands + coms for e in p["evidence"]}
    with db.reading(wh) as con:
        prompts = con.execute(
            "SELECT session_id, line_no, text FROM messages WHERE is_prompt AND session_id IN (SELECT unnest(?::VARCHAR[])) "
            "ORDER BY session_id, line_no", [CHECKOUT]).fetchall()
    free = [(s, n, t) for s, n, t in prompts
            if all((s, m) not in cited for m in (n - 1, n, n + 1)) and not any(t[:40] in e["quote"] for p in cands + coms for e in p["evidence"])]
    assert len(free) >= 3
    unproposed = [{"sessionId": s, "line": n, "quote": t[:40]} for s, n, t in free[:3]]

    gold = [
        *reviewed(*CHECKOUT),
        # memories: one clear rules-detectable match, one borderline, one clear rules-detectable item nobody
        # proposed, one clear item rules cannot find (out of the rules recall).
        {"type": "memory", "kind": "error_pattern", "claim": "m1", "certainty": "clear", "rulesDetectable": True, "evidence": [ev(wh, cands[0])]},
        {"type": "memory", "kind": "error_pattern", "claim": "m2", "certainty": "borderline", "rulesDetectable": True, "evidence": [ev(wh, cands[1])]},
        {"type": "memory", "kind": "procedural", "claim": "m3", "certainty": "clear", "rulesDetectable": True, "evidence": [unproposed[0]]},
        {"type": "memory", "kind": "semantic", "claim": "m4", "certainty": "clear", "rulesDetectable": False, "evidence": [unproposed[1]]},
        # commitments: one clear match, one by someone else (not scored), one labelled not_commitment,
        # and one clear promise nobody proposed.
        {"type": "commitment", "actor": coms[0]["actor"], "resolved": False, "certainty": "clear", "evidence": [ev(wh, coms[0])]},
        {"type": "commitment", "actor": "other", "resolved": False, "certainty": "clear", "evidence": [ev(wh, coms[1])]},
        {"type": "not_commitment", "evidence": [ev(wh, coms[2])]},
        {"type": "commitment", "actor": "user", "resolved": False, "certainty": "clear", "evidence": [unproposed[2]]},
    ]
    g1 = write_jsonl(tmp_path / "g1.jsonl", gold)
    code, doc = run_json(capsys, ["eval", "--gold", str(g1), "--db", str(wh), "--engine", "rules", "--out", str(tmp_path / "r1")])
    assert code == 0
    m, c = len(cands), len(coms)
    assert doc["memories"] == {"proposed": m, "matched": 1, "borderline_only": 1, "unmatched": m - 2,
                               "precision": round(1 / (m - 1), 4), "recall": 0.5, "clear": 2, "found": 1}
    # `resolved` is scored on the two proposals that match gold commitments (labelled unresolved here).
    assert doc["commitments"] == {"proposed": c, "matched": 1, "borderline_only": 1, "unmatched": c - 2,
                                  "precision": round(1 / (c - 1), 4), "recall": 0.5, "clear": 2, "found": 1,
                                  "resolvedAgreed": sum(not p["resolved"] for p in coms[:2]), "resolvedScored": 2}
    assert doc["falseCommitments"] == 1
    flagged = [e for e in doc["unmatchedExamples"]["commitments"] if e["notCommitment"]]
    assert [e["quote"] for e in flagged] == [coms[2]["evidence"][0]["quote"]]
    assert {"memories", "commitments", "falseCommitments", "unmatchedExamples"} <= set(doc)
    assert [b["outcome"] for b in doc["batches"]] == ["accepted"]
    # The table says the same; nothing was applied: the warehouse file is byte for byte unchanged.
    code, out, _ = run(capsys, ["eval", "--gold", str(g1), "--db", str(wh), "--engine", "rules", "--out", str(tmp_path / "r2")])
    assert code == 0 and "not_commitment items proposed as commitments: 1 of 1" in out
    assert "(1 of 2 rules-detectable clear items found)" in out
    assert digest(wh) == before
    assert not (tmp_path / "data").exists()


def test_artifacts_go_to_a_temporary_folder_by_default(wh: Path, tmp_path: Path, capsys) -> None:
    g = write_jsonl(tmp_path / "g.jsonl", reviewed(A1))
    code, doc = run_json(capsys, ["eval", "--gold", str(g), "--db", str(wh), "--engine", "rules"])
    assert code == 0
    out = Path(doc["outDir"])
    assert out.is_dir() and out.name.startswith("pipeline-eval-")
    assert sorted(p.name for p in out.iterdir()) == sorted([doc["batches"][0]["batchId"], "eval.json", "report.md", "report.html"])
    # the report of a rules run: scores, and a cost of nothing (no model call)
    assert json.loads((out / "eval.json").read_text(encoding="utf-8")) == doc
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "| memories |" in report and "Model calls: 0" in report and "cost $0.0000" in report
    assert doc["totals"]["calls"] == 0 and doc["totals"]["costUsd"] == 0.0 and doc["report"] == str(out / "report.md")


def test_the_openai_engine_against_the_fake_server(wh: Path, fake: FakeOpenAI, tmp_path: Path, capsys) -> None:
    answer = {
        "candidates": [{
            "kind": "error_pattern", "claim": "Test runs fail at import time: test-only packages are missing.",
            "gist": "Two sessions.", "entities": [{"type": "error", "name": "ModuleNotFoundError"}],
            "evidence": [{"sessionId": A1, "quote": MOD_A1}, {"sessionId": A2, "quote": MOD_A2}],
        }],
        "commitments": [{
            "statement": "The agent will add a regression test for the date parser.", "actor": "agent",
            "evidence": [{"sessionId": A1, "quote": PROMISE_A1}], "confidence": 0.8, "resolved": False,
        }],
        "readSessionIds": [A1, A2],
    }
    fake.add(
        tool_turn(call("list_sessions")),
        tool_turn(call("search_transcript", {"sessionId": A1, "phrase": "ModuleNotFoundError"}),
                  call("search_transcript", {"sessionId": A2, "phrase": "ModuleNotFoundError"})),
        tool_turn(call("submit_answer", answer)),
    )
    other_line = line_of(wh, A2, "freezegun") + 10
    with db.reading(wh) as con:
        other_text = con.execute("SELECT text FROM lines WHERE session_id = ? AND line_no = ?", [A2, other_line]).fetchone()
    assert other_text is not None
    gold = [
        *reviewed(A1, A2),
        {"type": "memory", "kind": "error_pattern", "claim": "imports fail", "certainty": "clear", "rulesDetectable": True,
         "evidence": [{"sessionId": A2, "line": line_of(wh, A2, MOD_A2), "quote": MOD_A2}]},
        # Rules could not find this one, but a model is measured on every clear item.
        {"type": "memory", "kind": "semantic", "claim": "unproposed", "certainty": "clear", "rulesDetectable": False,
         "evidence": [{"sessionId": A2, "line": other_line, "quote": other_text[0][:30]}]},
        {"type": "commitment", "actor": "agent", "resolved": False, "certainty": "clear",
         "evidence": [{"sessionId": A1, "line": line_of(wh, A1, PROMISE_A1), "quote": "regression test for the date parser"}]},
    ]
    g = write_jsonl(tmp_path / "g.jsonl", gold)
    code, doc = run_json(capsys, ["eval", "--gold", str(g), "--db", str(wh), "--engine", "openai", "--model", "fake-model",
                                  "--base-url", fake.base_url, "--out", str(tmp_path / "out")])
    assert code == 0 and doc["engine"] == "openai"
    assert doc["memories"] == {"proposed": 1, "matched": 1, "borderline_only": 0, "unmatched": 0, "precision": 1.0,
                               "recall": 0.5, "clear": 2, "found": 1}
    assert doc["commitments"] == {"proposed": 1, "matched": 1, "borderline_only": 0, "unmatched": 0, "precision": 1.0,
                                  "recall": 1.0, "clear": 1, "found": 1, "resolvedAgreed": 1, "resolvedScored": 1}
    assert doc["unmatchedExamples"] == {"memories": [], "commitments": []}
    [batch] = doc["batches"]
    assert batch["outcome"] == "accepted" and batch["tokens"]["prompt"] > 0
    assert len(fake.requests) == 3
    # The run's report puts the model's tokens, cached share and cost beside its scores.
    totals = doc["totals"]
    assert totals["calls"] == batch["modelCalls"] == 3 and totals["prompt"] == batch["tokens"]["prompt"]
    assert totals["cached"] == batch["tokens"]["cached"] and totals["cached"] > 0  # the fake caches shared prefixes
    assert totals["cachedShare"] == round(totals["cached"] / totals["prompt"], 4)
    assert doc["model"] == "fake-model" and batch["model"] == "fake-model"
    out = tmp_path / "out"
    assert json.loads((out / "eval.json").read_text(encoding="utf-8")) == doc
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "model fake-model" in report and f"endpoint: `{fake.base_url}`" in report
    assert f"prompt tokens {totals['prompt']:,}" in report and f"cached share {totals['cachedShare']:.3f}" in report
    assert ("no price" if totals["costUsd"] is None else f"${totals['costUsd']:.4f}") in report
    assert "<table>" in (out / "report.html").read_text(encoding="utf-8")
    assert "OPENAI_API_KEY" not in report


def test_a_failed_batch_exits_1_and_is_named(wh: Path, fake: FakeOpenAI, tmp_path: Path, capsys) -> None:
    g = write_jsonl(tmp_path / "g.jsonl", reviewed(A1))
    # An empty script: the fake answers 500 to every request, so the batch ends refused.
    code, out, _ = run(capsys, ["eval", "--gold", str(g), "--db", str(wh), "--engine", "openai", "--model", "m",
                                "--base-url", fake.base_url, "--out", str(tmp_path / "out"), "--max-retries", "0"])
    assert code == 1
    assert "ended refused" in out and "proposed nothing" in out


def test_a_malformed_gold_file_is_refused_with_file_line_field(wh: Path, tmp_path: Path, capsys) -> None:
    g = write_jsonl(tmp_path / "bad.jsonl", [
        {"type": "reviewed", "sessionId": A1},
        {"type": "memory", "kind": "error_pattern", "claim": "x", "certainty": "maybe", "rulesDetectable": True,
         "evidence": [{"sessionId": A1, "line": 1, "quote": "q"}]},
        "{oops",
    ])
    code, out, err = run(capsys, ["eval", "--gold", str(g), "--db", str(wh), "--engine", "rules"])
    assert code == 2 and out == ""
    assert f"{g}:2:certainty:" in err and f"{g}:3:-: not JSON" in err
    code, doc = run_json(capsys, ["eval", "--gold", str(g), "--db", str(wh), "--engine", "rules"])
    assert code == 2 and doc["exitCode"] == 2 and f"{g}:2:certainty:" in doc["error"]


def test_an_empty_reviewed_set_and_unknown_sessions_are_errors(wh: Path, tmp_path: Path, capsys) -> None:
    empty = write_jsonl(tmp_path / "empty.jsonl", [
        {"type": "not_commitment", "evidence": [{"sessionId": A1, "line": 1, "quote": "q"}]}])
    code, _, err = run(capsys, ["eval", "--gold", str(empty), "--db", str(wh), "--engine", "rules"])
    assert code == 2 and "no reviewed session" in err
    unknown = write_jsonl(tmp_path / "unknown.jsonl", reviewed(A1, "no-such-session"))
    code, _, err = run(capsys, ["eval", "--gold", str(unknown), "--db", str(wh), "--engine", "rules"])
    assert code == 2 and f"{unknown}:2: no-such-session" in err
    code, _, err = run(capsys, ["eval", "--gold", str(tmp_path / "missing.jsonl"), "--db", str(wh)])
    assert code == 2 and "no such gold file" in err


def test_gold_quotes_that_are_not_on_their_line_are_reported(wh: Path, tmp_path: Path, capsys) -> None:
    g = write_jsonl(tmp_path / "g.jsonl", [
        *reviewed(A1),
        {"type": "not_commitment", "evidence": [{"sessionId": A1, "line": 1, "quote": "a sentence that is nowhere"}]},
        {"type": "not_commitment", "evidence": [{"sessionId": A1, "line": 100000, "quote": "x"}]},
    ])
    code, _, err = run(capsys, ["eval", "--gold", str(g), "--db", str(wh), "--engine", "rules", "--out", str(tmp_path / "o")])
    assert code == 0
    assert f"warning: {g}:2:evidence[0]: quote not found on line 1 of {A1}" in err
    assert f"warning: {g}:3:evidence[0]: line 100000 does not exist in {A1}" in err
