"""Planted secrets, one whole night each with the rules engine and the openai engine (fake server):
no secret, verbatim or rewritten, in the corpus, its commit messages, `pipeline memories --json`,
`pipeline tasks --all --json`, the report, the artifacts, the warehouse's derived tables, or any
request sent to the model. The recurring errors that hold the secrets still land, masked."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pipeline.warehouse import db
from tests.fakes.openai_server import Dynamic, FakeOpenAI, Turn, call, text_turn, tool_results, tool_turn
from tests.helpers import REPO, built_once, planted_samples

pytestmark = pytest.mark.slow

# Fixed prefixes every key of a kind shares: only the generated part is a secret.
_PREFIX = re.compile(r"^(?:sk-proj-|sk_live_51|AKIA|sk-ant-api03-|ghp_|xoxb-|AIza|eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9\.)")
DERIVED_TABLES = ("memories", "memory_links", "tasks", "agent_tool_calls", "llm_calls", "batches", "runs",
                  "watermarks", "applied_artifacts")


def _forms(value: str, keep_digits: bool) -> str:
    return "".join(c.lower() for c in value if c.isascii() and (c.isalpha() or (keep_digits and c.isdigit())))


def secret_parts(planted: dict[str, str]) -> dict[str, list[str]]:
    """What must never leave, per kind: the generated part of each value (a private key's body lines)."""
    out: dict[str, list[str]] = {}
    for kind, value in planted.items():
        if kind == "private-key":
            parts = [ln for ln in value.splitlines() if not ln.startswith("-----")]
        elif kind == "email":
            parts = [value, value.split("@")[0]]
        else:
            parts = [_PREFIX.sub("", value)]
        out[kind] = parts
    return out


def leaks(text: str, parts: dict[str, list[str]]) -> list[str]:
    """The kinds of which `text` holds something: the value itself, or 12+ characters of it once case,
    digits (masked as <n> or removed) and separators are set aside."""
    text_forms = {keep: _forms(re.sub(r"<[a-z]{1,8}>", "", text, flags=re.I), keep) for keep in (True, False)}
    found = []
    for kind, values in parts.items():
        for value in values:
            if value in text:
                found.append(kind)
                break
            hit = False
            for keep in (True, False):
                form = _forms(value, keep)
                if any(form[i:i + 12] in text_forms[keep] for i in range(len(form) - 11)):
                    hit = True
            if hit:
                found.append(kind)
                break
    return found


def run_night(tmp: Path, source: Path, *extra: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ("PIPELINE_CRASH_AT", "OPENAI_API_KEY")}
    cmd = [sys.executable, "-m", "pipeline", "nightly", "--source", str(source), "--json",
           "--db", str(tmp / "w.duckdb"), "--corpus", str(tmp / "corpus"), "--runs", str(tmp / "runs"), *extra]
    out = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def cli_json(tmp: Path, *args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "pipeline", *args, "--json", "--db", str(tmp / "w.duckdb")],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def everything_that_left(tmp: Path) -> dict[str, str]:
    """Every text the night wrote outside the raw `lines`: by where it is."""
    out: dict[str, str] = {}
    corpus = tmp / "corpus"
    for p in sorted(corpus.rglob("*")):
        if ".git" in p.parts or not p.is_file():
            continue
        out[f"corpus file {p.relative_to(corpus)}"] = str(p.relative_to(corpus)) + "\n" + p.read_text(encoding="utf-8")
    log = subprocess.run(["git", "--git-dir", str(corpus / ".git"), "log", "--format=%H%n%B"], capture_output=True,
                         text=True, check=True).stdout
    out["commit messages"] = log
    out["pipeline memories --json"] = cli_json(tmp, "memories")
    out["pipeline tasks --all --json"] = cli_json(tmp, "tasks", "--all")
    for p in sorted((tmp / "runs").rglob("*")):
        if p.is_file():
            out[f"run file {p.relative_to(tmp / 'runs')}"] = p.read_text(encoding="utf-8", errors="replace")
    with db.reading(tmp / "w.duckdb") as con:
        for table in DERIVED_TABLES:
            rows = con.execute(f"SELECT * FROM {table}").fetchall()  # table names are this module's constants
            out[f"table {table}"] = "\n".join(map(str, rows))
    return out


def assert_nothing_leaks(where: dict[str, str], parts: dict[str, list[str]]) -> None:
    found = {name: kinds for name, text in where.items() if (kinds := leaks(text, parts))}
    assert not found, f"secrets left the transcript: {found}"


def test_the_checker_sees_a_secret_in_any_form() -> None:
    parts = {"openai-key": ["Q7vX9mN2pL4kR8sT1wY5zB3cD6fG0hJ2"]}
    for text in ("key Q7vX9mN2pL4kR8sT1wY5zB3cD6fG0hJ2", "key Q<n>vX<n>mN<n>pL<n>kR<n>sT<n>wY<n>zB<n>",
                 "q7vx-9mn2-pl4k-r8st-1wy5", "QvXmNpLkRsTwYzBcDfGhJ"):
        assert leaks(text, parts) == ["openai-key"], text
    assert leaks("key [REDACTED:openai-key] and QvXmN", parts) == []


@pytest.fixture(scope="module")
def rules_night(tmp_path_factory) -> tuple[Path, dict[str, str], dict[str, Any]]:
    """Run once for the whole test run (all xdist workers); the tests only read it."""

    def build(tmp: Path) -> dict[str, Any]:
        planted = planted_samples(tmp / "samples")
        return {"dir": str(tmp), "planted": planted, "summary": run_night(tmp, tmp / "samples", "--engine", "rules")}

    night = built_once(tmp_path_factory, "secrets-rules-night", build)
    return Path(night["dir"]), night["planted"], night["summary"]


def test_planted_secrets_are_of_many_kinds_and_all_detected(rules_night) -> None:
    tmp, planted, _ = rules_night
    kinds = {k.removesuffix("-2") for k in planted}
    assert len(kinds) >= 8
    from pipeline.consolidator.batch_secrets import scan_sessions

    with db.reading(tmp / "w.duckdb") as con:
        ids = [r[0] for r in con.execute("SELECT session_id FROM sessions").fetchall()]
        found = scan_sessions(con, ids)
    values = {s.value: s.kind for s in found.secrets}
    for kind, value in planted.items():
        assert values.get(value) == kind.removesuffix("-2"), kind


def test_a_rules_night_lands_the_recurring_errors_masked_and_leaks_nothing(rules_night) -> None:
    tmp, planted, summary = rules_night
    assert [b["status"] for b in summary["batches"]] == ["applied"]
    where = everything_that_left(tmp)
    assert_nothing_leaks(where, secret_parts(planted))
    # The errors that carried the secrets are still found, with the secrets masked.
    log = where["commit messages"]
    for mask in ("[REDACTED:stripe-key]", "[REDACTED:aws-access-key]", "[REDACTED:url-password]",
                 "[REDACTED:github-token]", "[REDACTED:openai-key]"):
        assert mask in log, mask
    tasks = where["pipeline tasks --all --json"]
    assert "[REDACTED:slack-token]" in tasks and "[REDACTED:email]" in tasks
    # report.html was written and holds no secret (checked above with every run file).
    assert any(name.endswith("report.html") for name in where)


# --- the openai engine, against the fake server ------------------------------------------------------
_CLAIMS = {
    "stripe": "Refund scripts fail because Stripe rejects the live key configured on the dev box.",
    "openai": "The summarise script cannot reach OpenAI: the configured project key is refused with HTTP 401.",
    "boto": "Listing the receipts bucket fails with SignatureDoesNotMatch from botocore.",
    "postgres": "The ledger database refuses password authentication from psql and SQLAlchemy.",
}
_QUOTES = {
    "stripe": re.compile(r"stripe\.error\.AuthenticationError: Invalid API Key provided: \[REDACTED:[a-z\-]+\]"),
    "openai": re.compile(r"openai\.AuthenticationError: Error code: 401 - Incorrect API key provided: \[REDACTED:[a-z\-]+\]"),
    "boto": re.compile(r"botocore\.exceptions\.ClientError: An error occurred \(SignatureDoesNotMatch\)[^\"\\]*"),
    "postgres": re.compile(r"connection to postgresql://ledger:\[REDACTED:[a-z\-]+\]@db\.internal:5432/ledger failed"),
}
_SLACK = re.compile(r"I'll rotate the Slack bot token \[REDACTED:[a-z\-]+\] tomorrow after the deploy\.")


def _read_results(body: dict[str, Any]) -> list[tuple[str, int, str]]:
    out = []
    for text in tool_results(body):
        try:
            result = json.loads(text)
        except ValueError:
            continue
        if isinstance(result, dict) and "lines" in result:
            out += [(result["sessionId"], line["line"], line["text"]) for line in result["lines"]]
    return out


def scripted_model(body: dict[str, Any]) -> Turn:
    """A model that lists the batch, reads every line, searches with a phrase copied from a masked
    result, and submits what it read: quotes, a claim and a statement holding masks."""
    turns = sum(1 for m in body["messages"] if m.get("role") == "assistant")
    results = tool_results(body)
    if turns == 0:
        return tool_turn(call("list_sessions"))
    if turns == 1:
        sessions = json.loads(results[-1])
        # Ten lines a call, so no result reaches the 60,000-character bound of read_lines.
        calls = [call("read_lines", {"sessionId": e["sessionId"], "start": start, "end": start + 9, "width": 4000})
                 for e in sessions for start in range(1, e["lineCount"] + 1, 10)]
        calls += [call("search_transcript", {"sessionId": e["sessionId"], "phrase": "Error"}) for e in sessions]
        return tool_turn(*calls)
    lines = _read_results(body)
    if turns == 2:
        masked = sorted({m.group(0) for _, _, text in lines if (m := _QUOTES["stripe"].search(text))})
        sids = sorted({sid for sid, _, _ in lines})
        return tool_turn(*(call("search_transcript", {"sessionId": sid, "phrase": p}) for sid in sids for p in masked))
    if turns == 3:
        candidates = []
        for name, pattern in _QUOTES.items():
            first: dict[str, str] = {}
            for sid, _, text in lines:
                if (m := pattern.search(text)) and sid not in first:
                    first[sid] = m.group(0)
            if len(first) >= 2:
                candidates.append({
                    "kind": "error_pattern", "claim": _CLAIMS[name],
                    "gist": "Seen while reading the batch; the key itself is masked in the transcript.",
                    "entities": [{"type": "error", "name": name}],
                    "evidence": [{"sessionId": sid, "quote": q} for sid, q in list(first.items())[:2]],
                })
        commitments = [{
            "statement": "The agent will rotate the Slack bot token [REDACTED:slack-token] tomorrow.",
            "actor": "agent", "confidence": 0.9, "resolved": False,
            "evidence": [{"sessionId": sid, "quote": m.group(0)}],
        } for sid, _, text in lines if (m := _SLACK.search(text))][:1]
        sids = sorted({sid for sid, _, _ in lines})
        return tool_turn(call("submit_answer", {"candidates": candidates, "commitments": commitments,
                                                "readSessionIds": sids}))
    return text_turn("done")


@pytest.fixture(scope="module")
def openai_night(tmp_path_factory) -> tuple[Path, dict[str, str], dict[str, Any], list[dict[str, Any]]]:
    """Run once for the whole test run (all xdist workers), with the fake server in the process that
    builds it; the tests only read it (the request bodies are JSON, as the server parsed them)."""

    def build(tmp: Path) -> dict[str, Any]:
        planted = planted_samples(tmp / "samples")
        with FakeOpenAI([Dynamic(scripted_model) for _ in range(40)]) as fake:
            # With the options of a local server, which reach each batch's notebook as parameters.
            summary = run_night(tmp, tmp / "samples", "--engine", "openai", "--model", "fake-model",
                                "--base-url", fake.base_url, "--tool-choice", "required", "--no-parallel-tool-calls",
                                "--context-tokens", "131072", "--timeout", "60", "--max-retries", "1")
            requests = list(fake.requests)
        return {"dir": str(tmp), "planted": planted, "summary": summary, "requests": requests}

    night = built_once(tmp_path_factory, "secrets-openai-night", build)
    return Path(night["dir"]), night["planted"], night["summary"], night["requests"]


def test_an_openai_night_sends_no_secret_to_the_model_and_leaks_nothing(openai_night) -> None:
    tmp, planted, summary, requests = openai_night
    assert [b["status"] for b in summary["batches"]] == ["applied"], summary
    assert len(requests) >= 4
    assert {(r["tool_choice"], r["parallel_tool_calls"], r["max_tokens"]) for r in requests} == {("required", False, 4096)}
    parts = secret_parts(planted)
    sent = {f"request {i + 1}": json.dumps(body, ensure_ascii=False) for i, body in enumerate(requests)}
    assert_nothing_leaks(sent, parts)
    # The model did read the planted lines: it saw the masks where the secrets were.
    everything = "\n".join(sent.values())
    for kind in ("stripe-key", "openai-key", "aws-access-key", "aws-secret-key", "url-password", "anthropic-key",
                 "github-token", "slack-token", "email", "private-key", "jwt", "google-api-key", "password"):
        assert f"[REDACTED:{kind}]" in everything, kind
    where = everything_that_left(tmp)
    assert_nothing_leaks(where, parts)
    assert summary["batches"][0]["memories"] >= 3
    log = where["commit messages"]
    assert "Invalid API Key provided: [REDACTED:stripe-key]" in log
    assert "[REDACTED:slack-token]" in where["pipeline tasks --all --json"]


def test_a_search_by_a_masked_phrase_finds_the_stored_secret(openai_night) -> None:
    _, _, _, requests = openai_night
    searched = [json.loads(r) for body in requests for r in tool_results(body) if '"phrase": "stripe.error' in r]
    # Found in the two sessions where the Stripe error was planted, and shown masked.
    assert sum(1 for r in searched if r["total"] >= 1) == 2
    assert all("[REDACTED:stripe-key]" in h["match"] and h["column"] >= 1 for r in searched for h in r["hits"])
