"""`pipeline check-answer`: always one JSON document; exit 0 accepted, 1 refused, 2 wrong invocation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pipeline.cli.main import main

A1 = "7a6738d0-a8f0-4bb2-bf15-e9ff77de2e75"
A2 = "94d17458-e734-483d-b466-8395216e13a2"
A3 = "e21ab715-308b-4e52-b34b-38dd65332483"
X1 = "01a16429-82e6-7f9b-8a2a-d5fcc8ee2920"
PG = {
    A1: 'psycopg.OperationalError: connection failed: connection to server at "127.0.0.1", port 5432 failed: Connection refused',
    A2: 'psycopg.OperationalError: connection failed: connection to server at "127.0.0.1", port 5433 failed: Connection refused',
    X1: 'psycopg.OperationalError: connection failed: connection to server at "10.0.3.7", port 6432 failed: Connection refused',
}


def valid() -> dict[str, Any]:
    return {
        "candidates": [
            {
                "kind": "error_pattern",
                "claim": "Postgres refuses connections in checkout-api test runs whatever the host or port.",
                "gist": "Seen locally on 5432 and 5433 and through the staging tunnel.",
                "entities": [{"type": "service", "name": "postgres"}],
                "evidence": [{"sessionId": s, "quote": q} for s, q in PG.items()],
            }
        ],
        "commitments": [
            {
                "statement": "The user will rotate the staging credentials.",
                "actor": "user",
                "dueHint": "2026-11-20",
                "evidence": [{"sessionId": A3, "quote": "I will rotate the staging credentials on 2026-11-20."}],
                "confidence": 0.85,
                "resolved": False,
            }
        ],
        "readSessionIds": [A1, A2, A3, X1],
    }


def check(capsys: pytest.CaptureFixture[str], tmp_path: Path, answer: Any, *args: str) -> tuple[int, dict[str, Any]]:
    path = tmp_path / "answer.json"
    path.write_text(answer if isinstance(answer, str) else json.dumps(answer), encoding="utf-8")
    capsys.readouterr()
    try:
        code = main(["check-answer", str(path), *args])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_a_valid_answer_is_accepted(wh: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = check(capsys, tmp_path, valid(), "--sessions", f"{A1},{A2},{A3},{X1}", "--db", str(wh))
    assert (code, doc) == (0, {"accepted": True})
    # --db before the file, ids split over repeated flags
    code, doc = check(capsys, tmp_path, valid(), "--db", str(wh), "--sessions", f"{A1},{A2}", "--sessions", f"{A3},{X1}")
    assert (code, doc) == (0, {"accepted": True})


def test_every_class_of_bad_answer_in_one_result(wh: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = valid()
    candidate = bad["candidates"][0]
    candidate["claim"] = "c" * 301                                           # claim too long
    candidate["evidence"][0]["quote"] = PG[A1].replace("5432", "5431")       # fabricated quote
    candidate["evidence"][1]["sessionId"] = "94d17458-nope"                  # fabricated session
    candidate["evidence"][2]["quote"] = "q" * 601                            # quote too long
    candidate["confidence"] = 1.0                                            # unknown field
    bad["candidates"].append({**valid()["candidates"][0], "evidence": [{"sessionId": A1, "quote": PG[A1]}]})  # one quote
    bad["commitments"][0]["dueHint"] = "next week"                          # not a date
    bad["readSessionIds"].append("ghost")                                    # unknown session (of the answer)
    code, doc = check(capsys, tmp_path, bad, "--sessions", f"{A1},{A2},{A3},{X1}", "--db", str(wh))
    assert code == 1 and doc["accepted"] is False
    paths = [p["path"] for p in doc["problems"]]
    assert paths == [
        "candidates[0].claim",
        "candidates[0].evidence[0].quote",
        "candidates[0].evidence[1].sessionId",
        "candidates[0].evidence[2].quote",
        "candidates[0].confidence",
        "candidates[1].evidence",
        "commitments[0].dueHint",
        "readSessionIds[4]",
    ]
    reasons = {p["path"]: p["reason"] for p in doc["problems"]}
    assert "most similar passage" in reasons["candidates[0].evidence[0].quote"]
    assert "not in this batch" in reasons["readSessionIds[4]"]
    assert set(doc) == {"accepted", "problems"}


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda a: a["candidates"][0].update(claim="x" * 301), "candidates[0].claim"),
        (lambda a: a["candidates"][0]["evidence"][0].update(quote="Connection refused!"), "candidates[0].evidence[0].quote"),
        (lambda a: a["candidates"][0]["evidence"][0].update(sessionId="s-404"), "candidates[0].evidence[0].sessionId"),
        (lambda a: a["candidates"][0].update(evidence=a["candidates"][0]["evidence"][:1]), "candidates[0].evidence"),
        (lambda a: a["candidates"][0]["evidence"][0].update(quote="y" * 601), "candidates[0].evidence[0].quote"),
        (lambda a: a.update(extra=True), "extra"),
        (lambda a: a.pop("readSessionIds"), "readSessionIds"),
    ],
)
def test_each_class_alone(wh: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], mutate: Any, path: str) -> None:
    answer = valid()
    mutate(answer)
    code, doc = check(capsys, tmp_path, answer, "--sessions", f"{A1},{A2},{A3},{X1}", "--db", str(wh))
    assert code == 1 and [p["path"] for p in doc["problems"]] == [path]


def test_broken_json_inside_the_file_is_an_invocation_error(wh: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = check(capsys, tmp_path, '{"candidates": [', "--sessions", A1, "--db", str(wh))
    assert code == 2 and "not valid JSON" in doc["error"]


def test_a_missing_file_still_prints_json(wh: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check-answer", str(tmp_path / "none.json"), "--sessions", A1, "--db", str(wh)])
    captured = capsys.readouterr()
    assert code == 2 and "no answer file" in json.loads(captured.out)["error"]
    assert "no answer file" in captured.err


def test_the_rules_answer_passes_check_answer(wh: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "b"
    assert main(["consolidate", "--pending", "--engine", "rules", "--out", str(out), "--db", str(wh)]) == 0
    ids = [s["sessionId"] for s in json.loads((out / "manifest.json").read_text())["sessions"]]
    capsys.readouterr()
    code = main(["check-answer", str(out / "answer.json"), "--sessions", ",".join(ids), "--db", str(wh)])
    assert (code, json.loads(capsys.readouterr().out)) == (0, {"accepted": True})
    # and the same answer is refused for a batch it does not belong to
    code = main(["check-answer", str(out / "answer.json"), "--sessions", A1, "--db", str(wh)])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and all("not in this batch" in p["reason"] for p in doc["problems"])


def test_sessions_flag_naming_unknown_or_no_session_is_a_usage_error(tmp_path, wh, capsys) -> None:
    from pipeline.cli.main import main

    answer = tmp_path / "a.json"
    answer.write_text('{"candidates": [], "commitments": [], "readSessionIds": []}')
    assert main(["check-answer", str(answer), "--sessions", "no-such-session", "--db", str(wh)]) == 2
    assert "does not have: no-such-session" in capsys.readouterr().err
    assert main(["check-answer", str(answer), "--sessions", "", "--db", str(wh)]) == 2


def test_json_flag_is_accepted_and_changes_nothing(wh: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = f"{A1},{A2},{A3},{X1}"
    plain = check(capsys, tmp_path, valid(), "--sessions", ids, "--db", str(wh))
    assert check(capsys, tmp_path, valid(), "--sessions", ids, "--db", str(wh), "--json") == plain == (0, {"accepted": True})
    # an error is the same single document with or without the flag
    for extra in ((), ("--json",)):
        capsys.readouterr()
        code = main(["check-answer", str(tmp_path / "none.json"), "--sessions", A1, "--db", str(wh), *extra])
        assert code == 2 and json.loads(capsys.readouterr().out)["exitCode"] == 2
